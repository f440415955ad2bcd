using System;
using System.Diagnostics;
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
            var previous = Activity.Current;
            var observed = new ObservedCall(_logger, context.Method, _target, _timeout, context.Options.CancellationToken);
            AsyncUnaryCall<TResponse> call;
            try
            {
                call = continuation(request, ObservedCall.Traced(context));
            }
            catch (Exception error)
            {
                throw observed.Failed(error, NoStatus);
            }
            finally
            {
                Activity.Current = previous;
            }
            return new AsyncUnaryCall<TResponse>(
                Completed(call, observed), call.ResponseHeadersAsync, call.GetStatus, call.GetTrailers, call.Dispose);
        }

        public override TResponse BlockingUnaryCall<TRequest, TResponse>(
            TRequest request,
            ClientInterceptorContext<TRequest, TResponse> context,
            BlockingUnaryCallContinuation<TRequest, TResponse> continuation)
        {
            var previous = Activity.Current;
            var observed = new ObservedCall(_logger, context.Method, _target, _timeout, context.Options.CancellationToken);
            try
            {
                var response = continuation(request, ObservedCall.Traced(context));
                observed.Succeeded();
                return response;
            }
            catch (Exception error)
            {
                var thrown = observed.Failed(error, NoStatus);
                if (ReferenceEquals(thrown, error))
                {
                    throw;
                }
                throw thrown;
            }
            finally
            {
                Activity.Current = previous;
            }
        }

        public override AsyncServerStreamingCall<TResponse> AsyncServerStreamingCall<TRequest, TResponse>(
            TRequest request,
            ClientInterceptorContext<TRequest, TResponse> context,
            AsyncServerStreamingCallContinuation<TRequest, TResponse> continuation)
        {
            var previous = Activity.Current;
            var observed = new ObservedCall(_logger, context.Method, _target, _streamTimeout, context.Options.CancellationToken);
            AsyncServerStreamingCall<TResponse> call;
            try
            {
                call = continuation(request, ObservedCall.Traced(context));
            }
            catch (Exception error)
            {
                throw observed.Failed(error, NoStatus);
            }
            finally
            {
                Activity.Current = previous;
            }
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

        private static async Task<TResponse> Completed<TResponse>(AsyncUnaryCall<TResponse> call, ObservedCall observed)
        {
            TResponse response;
            try
            {
                response = await call.ResponseAsync.ConfigureAwait(false);
            }
            catch (Exception error)
            {
                var thrown = observed.Failed(error, call.GetStatus);
                if (ReferenceEquals(thrown, error))
                {
                    throw;
                }
                throw thrown;
            }
            observed.Succeeded();
            return response;
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
                    var thrown = _observed.Failed(error, _status);
                    if (ReferenceEquals(thrown, error))
                    {
                        throw;
                    }
                    throw thrown;
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
