using System;
using System.Diagnostics;
using System.Runtime.ExceptionServices;
using System.Threading;
using System.Threading.Tasks;
using Grpc.Core;
using Grpc.Core.Interceptors;
using Microsoft.Extensions.Logging;

namespace Contextd.Client
{
    /// <summary>
    /// Every call through a <see cref="ContextdClient"/>'s <see cref="ContextdClient.CallInvoker"/>
    /// (its own methods, and generated stubs made over it) is observed here: an activity, log
    /// lines, and a <see cref="ContextdException"/> instead of an <see cref="RpcException"/>.
    /// </summary>
    internal sealed class ContextdInterceptor : Interceptor
    {
        private readonly ILogger _logger;
        private readonly string _target;
        private readonly TimeSpan? _timeout;
        private readonly TimeSpan? _streamTimeout;

        internal ContextdInterceptor(ILogger logger, string target, ContextdClientOptions options)
        {
            _logger = logger;
            _target = target;
            _timeout = options.Timeout;
            _streamTimeout = options.StreamTimeout;
        }

        public override AsyncUnaryCall<TResponse> AsyncUnaryCall<TRequest, TResponse>(
            TRequest request,
            ClientInterceptorContext<TRequest, TResponse> context,
            AsyncUnaryCallContinuation<TRequest, TResponse> continuation)
        {
            var call = Start(context, _timeout, traced => continuation(request, traced), out var observed);
            return new AsyncUnaryCall<TResponse>(
                Completed(call, observed), call.ResponseHeadersAsync, call.GetStatus, call.GetTrailers, call.Dispose);
        }

        public override TResponse BlockingUnaryCall<TRequest, TResponse>(
            TRequest request,
            ClientInterceptorContext<TRequest, TResponse> context,
            BlockingUnaryCallContinuation<TRequest, TResponse> continuation)
        {
            var response = Start(context, _timeout, traced => continuation(request, traced), out var observed);
            observed.Succeeded();
            return response;
        }

        public override AsyncServerStreamingCall<TResponse> AsyncServerStreamingCall<TRequest, TResponse>(
            TRequest request,
            ClientInterceptorContext<TRequest, TResponse> context,
            AsyncServerStreamingCallContinuation<TRequest, TResponse> continuation)
        {
            var call = Start(context, _streamTimeout, traced => continuation(request, traced), out var observed);
            return new AsyncServerStreamingCall<TResponse>(
                new ObservedReader<TResponse>(call.ResponseStream, observed, call.GetStatus),
                call.ResponseHeadersAsync,
                call.GetStatus,
                call.GetTrailers,
                () =>
                {
                    observed.Abandoned();
                    call.Dispose();
                });
        }

        /// <summary>
        /// Starts a call (unary or streaming) under its own observation, its trace context in its
        /// headers. The call's activity is current only while it starts: the caller's comes back
        /// after. A call that fails to start has no status to read.
        /// </summary>
        private TCall Start<TRequest, TResponse, TCall>(
            ClientInterceptorContext<TRequest, TResponse> context,
            TimeSpan? timeout,
            Func<ClientInterceptorContext<TRequest, TResponse>, TCall> continuation,
            out ObservedCall observed)
            where TRequest : class
            where TResponse : class
        {
            var previous = Activity.Current;
            observed = new ObservedCall(_logger, context.Method, _target, timeout, context.Options.CancellationToken);
            try
            {
                return continuation(ObservedCall.Traced(context));
            }
            catch (Exception error)
            {
                throw Thrown(observed, error, NoStatus);
            }
            finally
            {
                Activity.Current = previous;
            }
        }

        private static async Task<TResponse> Completed<TResponse>(AsyncUnaryCall<TResponse> call, ObservedCall observed)
        {
            TResponse response;
            try
            {
                response = await call.ResponseAsync.ConfigureAwait(false);
            }
            catch (Exception error)
            {
                throw Thrown(observed, error, call.GetStatus);
            }
            observed.Succeeded();
            return response;
        }

        /// <summary>
        /// Ends <paramref name="observed"/> with <paramref name="error"/> and gives the exception
        /// the caller sees in its place; an error the caller sees unchanged is rethrown here, with
        /// its own stack trace.
        /// </summary>
        private static Exception Thrown(ObservedCall observed, Exception error, Func<Status> status)
        {
            var thrown = observed.Failed(error, status);
            if (ReferenceEquals(thrown, error))
            {
                ExceptionDispatchInfo.Capture(error).Throw();
            }
            return thrown;
        }

        private static Status NoStatus() => throw new InvalidOperationException("the call did not start");

        /// <summary>A response stream whose end, or failure, ends its call's observation.</summary>
        private sealed class ObservedReader<T> : IAsyncStreamReader<T>
        {
            private readonly IAsyncStreamReader<T> _inner;
            private readonly ObservedCall _observed;
            private readonly Func<Status> _status;

            internal ObservedReader(IAsyncStreamReader<T> inner, ObservedCall observed, Func<Status> status)
            {
                _inner = inner;
                _observed = observed;
                _status = status;
            }

            public T Current => _inner.Current;

            public async Task<bool> MoveNext(CancellationToken cancellationToken)
            {
                bool more;
                try
                {
                    more = await _inner.MoveNext(cancellationToken).ConfigureAwait(false);
                }
                catch (Exception error)
                {
                    throw Thrown(_observed, error, _status);
                }
                if (!more)
                {
                    _observed.Succeeded();
                }
                return more;
            }
        }
    }
}
