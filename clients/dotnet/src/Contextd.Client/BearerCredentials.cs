using System;
using System.Collections.Generic;
using System.Text.RegularExpressions;
using System.Threading.Tasks;
using Grpc.Core;
using Grpc.Net.Client;

namespace Contextd.Client
{
    /// <summary>
    /// The <c>authorization: Bearer</c> header of every call, from
    /// <see cref="ContextdClientOptions.ApiKey"/> or <see cref="ContextdClientOptions.TokenProvider"/>,
    /// as gRPC call credentials on the channel.
    /// </summary>
    internal static class BearerCredentials
    {
        // API keys and JWTs are printable ASCII without spaces; anything else (a "Bearer "
        // pasted along, a newline read from a file) is refused here with a precise message
        // rather than by the server with a generic Unauthenticated.
        private static readonly Regex TokenPattern = new Regex("^[\\x21-\\x7E]+$", RegexOptions.CultureInvariant);

        /// <summary>
        /// Puts the credentials of <paramref name="options"/>, if any, on the channel: composed with
        /// <see cref="ChannelCredentials.SecureSsl"/> for an https address, else with
        /// <see cref="ChannelCredentials.Insecure"/>. grpc-dotnet drops call credentials on a
        /// plain-text channel unless <c>UnsafeUseInsecureChannelCallCredentials</c> is set; contextd's
        /// plain-text port is the loopback set-up, so it is set there (TLS protects the key elsewhere).
        /// </summary>
        internal static void Apply(ContextdClientOptions options, Uri address, GrpcChannelOptions channelOptions)
        {
            var callCredentials = From(options);
            if (callCredentials == null)
            {
                return;
            }
            var secure = address.Scheme == Uri.UriSchemeHttps;
            channelOptions.Credentials = ChannelCredentials.Create(
                secure ? ChannelCredentials.SecureSsl : ChannelCredentials.Insecure, callCredentials);
            channelOptions.UnsafeUseInsecureChannelCallCredentials = !secure;
        }

        private static CallCredentials? From(ContextdClientOptions options)
        {
            var apiKey = options.ApiKey;
            var provider = options.TokenProvider;
            if (apiKey != null && provider != null)
            {
                throw new ArgumentException("give either ApiKey or TokenProvider, not both", nameof(options));
            }
            if ((apiKey != null || provider != null) && HasAuthorization(options.Headers))
            {
                throw new ArgumentException("Headers already has an authorization entry; drop it or the ApiKey/TokenProvider", nameof(options));
            }
            if (apiKey != null)
            {
                var header = "Bearer " + Checked(apiKey, "ApiKey");
                return CallCredentials.FromInterceptor((context, metadata) =>
                {
                    metadata.Add("authorization", header);
                    return Task.CompletedTask;
                });
            }
            if (provider == null)
            {
                return null;
            }
            // Asked before every call, so a refreshed token (Office SSO) is used at once.
            return CallCredentials.FromInterceptor(async (context, metadata) =>
            {
                string? token;
                try
                {
                    token = await provider(context.CancellationToken).ConfigureAwait(false);
                }
                catch (OperationCanceledException) when (context.CancellationToken.IsCancellationRequested)
                {
                    throw;
                }
                catch (Exception error)
                {
                    // grpc-dotnet would report this as an INTERNAL "Error starting gRPC call";
                    // ContextdException makes it UNAUTHENTICATED, naming the provider.
                    throw new TokenProviderException("the TokenProvider failed: " + error.Message, error);
                }
                var problem = Problem(token, "the TokenProvider's result");
                if (problem != null)
                {
                    throw new TokenProviderException(problem, null);
                }
                metadata.Add("authorization", "Bearer " + token);
            });
        }

        private static string Checked(string? token, string source)
        {
            var problem = Problem(token, source);
            if (problem != null)
            {
                throw new ArgumentException(problem);
            }
            return token!;
        }

        private static string? Problem(string? token, string source) =>
            token != null && TokenPattern.IsMatch(token)
                ? null
                : source + " must be a non-empty token of printable characters without spaces " +
                  "(the key or token itself, without 'Bearer ')";

        private static bool HasAuthorization(IDictionary<string, string> headers)
        {
            foreach (var key in headers.Keys)
            {
                if (string.Equals(key, "authorization", StringComparison.OrdinalIgnoreCase))
                {
                    return true;
                }
            }
            return false;
        }
    }

    /// <summary>The <see cref="ContextdClientOptions.TokenProvider"/> failed or gave no usable token.</summary>
    internal sealed class TokenProviderException : Exception
    {
        internal TokenProviderException(string message, Exception? inner)
            : base(message, inner)
        {
        }
    }
}
