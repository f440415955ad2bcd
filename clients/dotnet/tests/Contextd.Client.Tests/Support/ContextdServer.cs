using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Linq;
using System.Reflection;
using System.Text.Json;
using System.Threading;
using System.Threading.Tasks;

namespace Contextd.Client.Tests.Support
{
    /// <summary>
    /// One <c>contextd serve</c> process on free ports (<c>--port 0</c>, and <c>--web-port 0</c>)
    /// with a fresh data directory, from the repository's own venv. Disposing it kills the
    /// process and removes the directory.
    /// </summary>
    public sealed class ContextdServer : IDisposable
    {
        private static readonly TimeSpan StartTimeout = TimeSpan.FromSeconds(60);

        private readonly Process _process;
        private readonly ConcurrentQueue<string> _log = new ConcurrentQueue<string>();
        private readonly ConcurrentQueue<string> _output = new ConcurrentQueue<string>();

        private ContextdServer(Process process, string dataDir)
        {
            _process = process;
            DataDir = dataDir;
        }

        /// <summary>The native gRPC address, <c>127.0.0.1:port</c>.</summary>
        public string Address { get; private set; } = "";

        /// <summary>The gRPC-Web address, <c>127.0.0.1:port</c>.</summary>
        public string WebAddress { get; private set; } = "";

        public string DataDir { get; }

        /// <summary>What the server logged so far (JSON lines), for a failing test's message.</summary>
        public string Log => string.Join("\n", _log);

        /// <summary>What the server wrote to standard output so far (spans, with <c>OTEL_TRACES_EXPORTER=console</c>).</summary>
        public string Output => string.Join("\n", _output);

        /// <summary>
        /// Starts <c>contextd serve ARGS</c> and waits for the addresses it logs; <paramref name="prepare"/>
        /// runs on the fresh data directory first (to create API keys, say).
        /// </summary>
        public static ContextdServer Start(
            IEnumerable<string> args,
            IDictionary<string, string>? environment = null,
            Action<string>? prepare = null)
        {
            var dataDir = Directory.CreateTempSubdirectory("contextd-dotnet-").FullName;
            prepare?.Invoke(dataDir);
            // The server runs under a shell that stops it when its standard input closes: when
            // this process ends, however it ends (a crash skips every Dispose), the pipe closes
            // with it, and no server outlives the tests.
            var info = new ProcessStartInfo("/bin/sh")
            {
                RedirectStandardError = true,
                RedirectStandardInput = true,
                RedirectStandardOutput = true,
                UseShellExecute = false,
            };
            info.ArgumentList.Add("-c");
            info.ArgumentList.Add("\"$0\" \"$@\" & child=$!; read -r _; kill $child 2>/dev/null; wait $child");
            info.ArgumentList.Add(Executable);
            foreach (var arg in new[] { "serve", "--port", "0", "--web-port", "0", "--data-dir", dataDir }.Concat(args))
            {
                info.ArgumentList.Add(arg);
            }
            foreach (var pair in environment ?? new Dictionary<string, string>())
            {
                info.Environment[pair.Key] = pair.Value;
            }
            var process = Process.Start(info) ?? throw new InvalidOperationException("could not start " + Executable);
            var server = new ContextdServer(process, dataDir);
            try
            {
                server.WaitUntilListening();
            }
            catch
            {
                server.Dispose();
                throw;
            }
            return server;
        }

        /// <summary>
        /// The contextd executable: <c>CONTEXTD_BIN</c> when set (the test runner sets it to
        /// the venv's), else the repository's <c>.venv/bin/contextd</c>.
        /// </summary>
        public static string Executable
        {
            get
            {
                var configured = Environment.GetEnvironmentVariable("CONTEXTD_BIN");
                if (!string.IsNullOrEmpty(configured))
                {
                    return configured;
                }
                var path = Path.Combine(RepositoryRoot, ".venv", "bin", "contextd");
                if (!File.Exists(path))
                {
                    throw new InvalidOperationException(
                        path + " does not exist: run `make .venv/.dev-deps` at the top of the repository, " +
                        "or set CONTEXTD_BIN to a contextd executable");
                }
                return path;
            }
        }

        public static string RepositoryRoot => Metadata("RepositoryRoot");

        public static string Metadata(string key) =>
            typeof(ContextdServer).Assembly.GetCustomAttributes<AssemblyMetadataAttribute>()
                .Single(a => a.Key == key).Value
            ?? throw new InvalidOperationException("no assembly metadata " + key);

        /// <summary>Runs <c>contextd ARGS</c> (a CLI command such as <c>keys create</c>) and returns its standard output.</summary>
        public static string RunCommand(params string[] args)
        {
            var info = new ProcessStartInfo(Executable)
            {
                RedirectStandardError = true,
                RedirectStandardOutput = true,
                UseShellExecute = false,
            };
            foreach (var arg in args)
            {
                info.ArgumentList.Add(arg);
            }
            using var process = Process.Start(info) ?? throw new InvalidOperationException("could not start " + Executable);
            var output = process.StandardOutput.ReadToEndAsync();
            var error = process.StandardError.ReadToEndAsync();
            if (!process.WaitForExit(60_000))
            {
                process.Kill(entireProcessTree: true);
                throw new TimeoutException("contextd " + string.Join(" ", args) + " did not finish in 60 s");
            }
            if (process.ExitCode != 0)
            {
                throw new InvalidOperationException(
                    "contextd " + string.Join(" ", args) + " exited with " + process.ExitCode + ": " + error.Result);
            }
            return output.Result;
        }

        /// <summary>A new API key of <paramref name="user"/> in the data directory <paramref name="dataDir"/>.</summary>
        public static string CreateKey(string dataDir, string user) =>
            RunCommand("keys", "create", "--user", user, "--data-dir", dataDir).Trim();

        private void WaitUntilListening()
        {
            var listening = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
            _process.ErrorDataReceived += (_, e) =>
            {
                if (e.Data == null)
                {
                    // Standard error closed: the process ended (or is ending).
                    listening.TrySetException(new InvalidOperationException("contextd exited before it listened:\n" + Log));
                    return;
                }
                _log.Enqueue(e.Data);
                var (msg, address) = Parse(e.Data);
                if (msg == "grpc-web listening")
                {
                    WebAddress = address;
                }
                else if (msg == "listening")
                {
                    // The web port's line comes first (docs/web.md).
                    Address = address;
                    listening.TrySetResult(true);
                }
            };
            _process.OutputDataReceived += (_, e) =>
            {
                if (e.Data != null)
                {
                    _output.Enqueue(e.Data);
                }
            };
            _process.BeginErrorReadLine();
            _process.BeginOutputReadLine();
            bool listened;
            try
            {
                listened = listening.Task.Wait(StartTimeout);
            }
            catch (AggregateException failed)
            {
                throw failed.InnerException!;
            }
            if (!listened)
            {
                throw new TimeoutException("contextd did not listen within " + StartTimeout.TotalSeconds + " s:\n" + Log);
            }
            if (WebAddress.Length == 0)
            {
                throw new InvalidOperationException("contextd logged no gRPC-Web address:\n" + Log);
            }
        }

        private static (string Msg, string Address) Parse(string line)
        {
            try
            {
                using var document = JsonDocument.Parse(line);
                var root = document.RootElement;
                if (root.ValueKind != JsonValueKind.Object || !root.TryGetProperty("msg", out var msg))
                {
                    return ("", "");
                }
                var address = root.TryGetProperty("address", out var a) ? a.GetString() ?? "" : "";
                return (msg.GetString() ?? "", address);
            }
            catch (JsonException)
            {
                return ("", "");
            }
        }

        public void Dispose()
        {
            try
            {
                // Closing standard input stops the server (SIGTERM); it is killed if it lingers.
                _process.StandardInput.Close();
                if (!_process.WaitForExit(15_000))
                {
                    _process.Kill(entireProcessTree: true);
                    _process.WaitForExit(10_000);
                }
            }
            catch (InvalidOperationException)
            {
                // Exited already.
            }
            _process.Dispose();
            try
            {
                Directory.Delete(DataDir, recursive: true);
            }
            catch (IOException)
            {
                // A file still held by a child that is going away; the temporary folder is the OS's to clean.
            }
        }
    }
}
