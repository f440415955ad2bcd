using System.Diagnostics;
using System.Reflection;

namespace Contextd.Client
{
    /// <summary>
    /// The names under which the client reports what it does: its <see cref="ActivitySource"/>
    /// (one Client activity per call, whose trace context the server continues) and the
    /// category of its log messages.
    /// </summary>
    public static class ContextdDiagnostics
    {
        /// <summary>
        /// The name of the client's <see cref="ActivitySource"/> and of its logger category:
        /// add it to OpenTelemetry's tracing (<c>AddSource("Contextd.Client")</c>).
        /// </summary>
        public const string SourceName = "Contextd.Client";

        internal static readonly ActivitySource Source = new ActivitySource(
            SourceName,
            typeof(ContextdDiagnostics).Assembly.GetCustomAttribute<AssemblyInformationalVersionAttribute>()?.InformationalVersion);
    }
}
