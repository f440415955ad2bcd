using System;
using System.Net.Http;
using Contextd.Client;
using Microsoft.Extensions.AI;
using Microsoft.Extensions.Configuration;
using Microsoft.Extensions.DependencyInjection.Extensions;
using Microsoft.Extensions.Logging;
using Microsoft.Extensions.Options;

namespace Microsoft.Extensions.DependencyInjection
{
    /// <summary>
    /// Registers contextd's client with a host's services: <c>AddContextdClient</c> for
    /// <see cref="IContextdClient"/>, <c>AddContextdChatClient</c> for an <see cref="IChatClient"/>
    /// over its chat turns.
    /// </summary>
    public static class ContextdServiceCollectionExtensions
    {
        /// <summary>The name of the HTTP client whose handler pipeline the client sends through.</summary>
        public const string HttpClientName = "Contextd.Client";

        /// <summary>
        /// Registers <see cref="IContextdClient"/> (and <see cref="ContextdClient"/>) as a singleton,
        /// configured by <paramref name="configure"/>, logging to the container's
        /// <see cref="ILoggerFactory"/> and sending through the HTTP client factory's handler
        /// pipeline named <see cref="HttpClientName"/>.
        /// </summary>
        /// <returns>That HTTP client's builder, to add handlers to its pipeline.</returns>
        public static IHttpClientBuilder AddContextdClient(this IServiceCollection services, Action<ContextdClientOptions> configure)
        {
            if (services is null)
            {
                throw new ArgumentNullException(nameof(services));
            }
            if (configure is null)
            {
                throw new ArgumentNullException(nameof(configure));
            }
            services.AddOptions<ContextdClientOptions>().Configure(configure);
            return AddClient(services);
        }

        /// <summary>
        /// Registers <see cref="IContextdClient"/> as above, with its options bound from
        /// <paramref name="configuration"/> (a section such as <c>Contextd</c>:
        /// <c>Address</c>, <c>UseGrpcWeb</c>, <c>GrpcWebAddress</c>, <c>Timeout</c>, <c>Headers</c>, ...).
        /// </summary>
        /// <returns>The HTTP client's builder, to add handlers to its pipeline.</returns>
        public static IHttpClientBuilder AddContextdClient(this IServiceCollection services, IConfiguration configuration)
        {
            if (services is null)
            {
                throw new ArgumentNullException(nameof(services));
            }
            if (configuration is null)
            {
                throw new ArgumentNullException(nameof(configuration));
            }
            services.AddOptions<ContextdClientOptions>().Bind(configuration);
            return AddClient(services);
        }

        /// <summary>
        /// Registers an <see cref="IChatClient"/>: a <see cref="ContextdChatClient"/> over the
        /// registered <see cref="IContextdClient"/> (call <c>AddContextdClient</c> too).
        /// </summary>
        /// <returns>The chat client's builder, to add Microsoft.Extensions.AI's middleware (logging, OpenTelemetry, ...).</returns>
        public static ChatClientBuilder AddContextdChatClient(this IServiceCollection services, Action<ContextdChatClientOptions>? configure = null)
        {
            if (services is null)
            {
                throw new ArgumentNullException(nameof(services));
            }
            var options = services.AddOptions<ContextdChatClientOptions>();
            if (configure != null)
            {
                options.Configure(configure);
            }
            return services.AddChatClient(provider => new ContextdChatClient(
                provider.GetRequiredService<IContextdClient>(),
                provider.GetRequiredService<IOptions<ContextdChatClientOptions>>().Value));
        }

        // One client for the application: a channel is meant to live long. The factory's
        // handler is the caller's; the client never disposes it.
        private static IHttpClientBuilder AddClient(IServiceCollection services)
        {
            var builder = services.AddHttpClient(HttpClientName);
            services.TryAddSingleton(provider =>
            {
                var options = provider.GetRequiredService<IOptions<ContextdClientOptions>>().Value;
                if (options.HttpHandler != null)
                {
                    throw new InvalidOperationException(
                        "ContextdClientOptions.HttpHandler is not used with AddContextdClient: configure the handler pipeline on the IHttpClientBuilder it returns");
                }
                var handler = provider.GetRequiredService<IHttpMessageHandlerFactory>().CreateHandler(HttpClientName);
                return new ContextdClient(options, handler, options.LoggerFactory ?? provider.GetService<ILoggerFactory>());
            });
            services.TryAddSingleton<IContextdClient>(provider => provider.GetRequiredService<ContextdClient>());
            return builder;
        }
    }
}
