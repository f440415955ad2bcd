using System;
using System.Collections.Generic;
using System.Globalization;
using System.Linq;
using Google.Protobuf;
using Google.Rpc;
using Grpc.Core;

namespace Contextd.Client
{
    /// <summary>
    /// A failed contextd call: the gRPC status code, the server's message and, for
    /// <c>InvalidArgument</c>, every request field the server rejected.
    /// </summary>
    public sealed class ContextdException : Exception
    {
        private ContextdException(
            StatusCode statusCode,
            string detail,
            IReadOnlyList<FieldViolation> fieldViolations,
            Exception? inner)
            : base(Describe(statusCode, detail, fieldViolations), inner)
        {
            StatusCode = statusCode;
            Detail = detail;
            FieldViolations = fieldViolations;
        }

        /// <summary>The gRPC status code, for example <c>StatusCode.InvalidArgument</c>.</summary>
        public StatusCode StatusCode { get; }

        /// <summary>The server's message, without the code.</summary>
        public string Detail { get; }

        /// <summary>
        /// The fields named by the google.rpc.BadRequest detail of an <c>InvalidArgument</c>
        /// status; empty for other errors.
        /// </summary>
        public IReadOnlyList<FieldViolation> FieldViolations { get; }

        /// <summary>Wraps a failed call, reading the rich status from its trailers.</summary>
        public static ContextdException FromRpcException(RpcException error)
        {
            if (error is null)
            {
                throw new ArgumentNullException(nameof(error));
            }
            for (var cause = error.Status.DebugException; cause != null; cause = cause.InnerException)
            {
                if (cause is TokenProviderException failed)
                {
                    return new ContextdException(
                        StatusCode.Unauthenticated, failed.Message, Array.Empty<FieldViolation>(), failed.InnerException ?? failed);
                }
            }
            return new ContextdException(error.StatusCode, error.Status.Detail, ReadViolations(error), error);
        }

        /// <summary>
        /// A failed call of a client at <paramref name="target"/>, with what the transport leaves
        /// out: the address of a server that could not be reached, and the deadline that passed.
        /// </summary>
        internal static ContextdException FromRpcException(RpcException error, string target, TimeSpan? timeout)
        {
            var translated = FromRpcException(error);
            string? detail = null;
            if (translated.StatusCode == StatusCode.Unavailable && !translated.Detail.Contains(target))
            {
                detail = "contextd at " + target + " could not be reached: " + translated.Detail;
            }
            else if (translated.StatusCode == StatusCode.DeadlineExceeded)
            {
                // grpc-dotnet's own detail is empty: say which deadline passed, and where.
                detail = "contextd at " + target + " did not answer within the call's deadline"
                    + (timeout.HasValue ? " of " + timeout.Value.TotalSeconds.ToString(CultureInfo.InvariantCulture) + " s" : "")
                    + (translated.Detail.Length > 0 ? ": " + translated.Detail : "");
            }
            return detail == null
                ? translated
                : new ContextdException(translated.StatusCode, detail, translated.FieldViolations, error);
        }

        /// <summary>A stream that broke the protocol (for example ended before TurnCompleted).</summary>
        internal static ContextdException Protocol(string detail) =>
            new ContextdException(StatusCode.Internal, detail, Array.Empty<FieldViolation>(), null);

        private static IReadOnlyList<FieldViolation> ReadViolations(RpcException error)
        {
            // GetRpcStatus is Grpc.StatusProto's extension (namespace Grpc.Core); GetDetail is
            // Google.Rpc.Status's own method (Google.Api.CommonProtos).
            Google.Rpc.Status? status;
            try
            {
                status = error.GetRpcStatus();
            }
            catch (InvalidProtocolBufferException)
            {
                // A garbled grpc-status-details-bin trailer must not hide the status itself.
                return Array.Empty<FieldViolation>();
            }
            var badRequest = status?.GetDetail<BadRequest>();
            if (badRequest is null)
            {
                return Array.Empty<FieldViolation>();
            }
            return badRequest.FieldViolations
                .Select(v => new FieldViolation(v.Field, v.Description))
                .ToList();
        }

        private static string Describe(
            StatusCode statusCode,
            string detail,
            IReadOnlyList<FieldViolation> fieldViolations)
        {
            var text = statusCode + ": " + detail;
            if (fieldViolations.Count == 0)
            {
                return text;
            }
            return text + " (" + string.Join("; ", fieldViolations) + ")";
        }
    }
}
