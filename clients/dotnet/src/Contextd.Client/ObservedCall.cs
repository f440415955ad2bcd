using System;
using System.Diagnostics;
using System.Threading;
using Grpc.Core;
using Grpc.Core.Interceptors;
using Microsoft.Extensions.Logging;

namespace Contextd.Client
{
    /// <summary>
    /// One call as the host sees it: its activity (with the trace context sent to the server),
    /// its log lines (Debug when it starts and ends, Warning when it fails) and the
    /// <see cref="ContextdException"/> a failure becomes. Logs name the method, the status code
    /// and the fields the server rejected, never a credential or a message's text.
    /// </summary>
    internal sealed class ObservedCall
    {
        private readonly ILogger _logger;
        private readonly string _method;
        private readonly string _target;
        private readonly TimeSpan? _timeout;
        private readonly CancellationToken _cancellationToken;
        private readonly Activity? _activity;
        private readonly Stopwatch _elapsed = Stopwatch.StartNew();
        private int _ended;

        internal ObservedCall(ILogger logger, IMethod method, string target, TimeSpan? timeout, CancellationToken cancellationToken)
        {
            _logger = logger;
            _method = method.ServiceName + "/" + method.Name;
            _target = target;
            _timeout = timeout;
            _cancellationToken = cancellationToken;
            _activity = ContextdDiagnostics.Source.StartActivity(_method, ActivityKind.Client);
            if (_activity != null)
            {
                _activity.SetTag("rpc.system", "grpc");
                _activity.SetTag("rpc.service", method.ServiceName);
                _activity.SetTag("rpc.method", method.Name);
                if (Uri.TryCreate(target, UriKind.Absolute, out var address))
                {
                    _activity.SetTag("server.address", address.Host);
                    _activity.SetTag("server.port", address.Port);
                }
            }
            _logger.LogDebug("contextd call {Method} to {Target}", _method, _target);
        }

        /// <summary>
        /// <paramref name="context"/> with the trace context of the current activity (this
        /// call's, or the host's when nobody listens to the client's source) in its headers.
        /// </summary>
        internal static ClientInterceptorContext<TRequest, TResponse> Traced<TRequest, TResponse>(
            ClientInterceptorContext<TRequest, TResponse> context)
            where TRequest : class
            where TResponse : class
        {
            var headers = WithTraceContext(context.Options.Headers);
            return headers == null || ReferenceEquals(headers, context.Options.Headers)
                ? context
                : new ClientInterceptorContext<TRequest, TResponse>(context.Method, context.Host, context.Options.WithHeaders(headers));
        }

        /// <summary>The call ended with its last message.</summary>
        internal void Succeeded()
        {
            if (Interlocked.Exchange(ref _ended, 1) != 0)
            {
                return;
            }
            _activity?.SetTag("rpc.grpc.status_code", (int)StatusCode.OK);
            _activity?.Stop();
            _logger.LogDebug("contextd call {Method} returned in {ElapsedMs} ms", _method, _elapsed.ElapsedMilliseconds);
        }

        /// <summary>The caller stopped reading a stream before its end.</summary>
        internal void Abandoned()
        {
            if (Interlocked.Exchange(ref _ended, 1) != 0)
            {
                return;
            }
            _activity?.Stop();
            _logger.LogDebug("contextd call {Method} left unread after {ElapsedMs} ms", _method, _elapsed.ElapsedMilliseconds);
        }

        /// <summary>
        /// The exception to throw for <paramref name="error"/>: a <see cref="ContextdException"/>
        /// for a failed call, the <see cref="OperationCanceledException"/> itself for a call the
        /// caller cancelled, anything else unchanged. Ends the activity and logs it.
        /// </summary>
        internal Exception Failed(Exception error, Func<Status> status)
        {
            var thrown = Translate(error, status);
            if (Interlocked.Exchange(ref _ended, 1) != 0)
            {
                return thrown;
            }
            if (thrown is OperationCanceledException)
            {
                _activity?.SetTag("rpc.grpc.status_code", (int)StatusCode.Cancelled);
                _activity?.Stop();
                _logger.LogDebug("contextd call {Method} cancelled after {ElapsedMs} ms", _method, _elapsed.ElapsedMilliseconds);
                return thrown;
            }
            var code = thrown is ContextdException failed ? failed.StatusCode : StatusCode.Unknown;
            if (_activity != null)
            {
                _activity.SetTag("rpc.grpc.status_code", (int)code);
                _activity.SetTag("error.type", code.ToString());
                _activity.SetStatus(ActivityStatusCode.Error);
                _activity.Stop();
            }
            var fields = thrown is ContextdException rejected && rejected.FieldViolations.Count > 0
                ? string.Join(", ", System.Linq.Enumerable.Select(rejected.FieldViolations, v => v.Field))
                : "";
            _logger.LogWarning(
                "contextd call {Method} failed with {StatusCode} after {ElapsedMs} ms (fields rejected: {Fields})",
                _method, code, _elapsed.ElapsedMilliseconds, fields);
            return thrown;
        }

        private Exception Translate(Exception error, Func<Status> status)
        {
            switch (error)
            {
                case RpcException failed:
                    return ContextdException.FromRpcException(failed, _target, _timeout);
                case OperationCanceledException cancelled when !_cancellationToken.IsCancellationRequested:
                    return Uncancelled(cancelled, status);
                default:
                    return error;
            }
        }

        // With ThrowOperationCanceledOnCancellation, grpc-dotnet reports a call that failed while
        // its credentials were read (a TokenProvider that threw, a deadline that passed meanwhile)
        // as a cancellation the caller never asked for. The call's status says what happened.
        private Exception Uncancelled(OperationCanceledException cancelled, Func<Status> status)
        {
            Status final;
            try
            {
                final = status();
            }
            catch (InvalidOperationException)
            {
                return cancelled;
            }
            return final.StatusCode == StatusCode.OK || final.StatusCode == StatusCode.Cancelled
                ? cancelled
                : ContextdException.FromRpcException(new RpcException(final), _target, _timeout);
        }

        // contextd reads W3C trace context (traceparent, tracestate); the caller's own header wins.
        private static Metadata? WithTraceContext(Metadata? headers)
        {
            var current = Activity.Current;
            if (current == null || current.IdFormat != ActivityIdFormat.W3C || headers?.Get("traceparent") != null)
            {
                return headers;
            }
            var sent = new Metadata();
            if (headers != null)
            {
                foreach (var entry in headers)
                {
                    sent.Add(entry);
                }
            }
            sent.Add("traceparent", current.Id!);
            if (!string.IsNullOrEmpty(current.TraceStateString))
            {
                sent.Add("tracestate", current.TraceStateString!);
            }
            return sent;
        }
    }
}
