using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Linq;
using Microsoft.Extensions.Logging;

namespace Contextd.Client.Tests.Support
{
    /// <summary>Keeps every log line written through it, with its level, category and rendered text.</summary>
    public sealed class RecordingLoggerProvider : ILoggerProvider
    {
        private readonly ConcurrentQueue<(LogLevel Level, string Category, string Text)> _lines =
            new ConcurrentQueue<(LogLevel, string, string)>();

        public IReadOnlyList<(LogLevel Level, string Category, string Text)> Lines => _lines.ToList();

        public ILogger CreateLogger(string categoryName) => new Recorder(this, categoryName);

        public void Dispose()
        {
        }

        private sealed class Recorder : ILogger
        {
            private readonly RecordingLoggerProvider _provider;
            private readonly string _category;

            internal Recorder(RecordingLoggerProvider provider, string category)
            {
                _provider = provider;
                _category = category;
            }

            public IDisposable? BeginScope<TState>(TState state)
                where TState : notnull => null;

            public bool IsEnabled(LogLevel logLevel) => true;

            public void Log<TState>(LogLevel logLevel, EventId eventId, TState state, Exception? exception, Func<TState, Exception?, string> formatter) =>
                _provider._lines.Enqueue((logLevel, _category, formatter(state, exception) + (exception == null ? "" : " " + exception)));
        }
    }
}
