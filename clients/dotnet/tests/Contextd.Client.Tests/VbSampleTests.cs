using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Linq;
using System.Text.RegularExpressions;
using Contextd.Client.Tests.Support;
using Xunit;
using Xunit.Abstractions;

namespace Contextd.Client.Tests
{
    /// <summary>The VB.NET sample, built for net10.0, run against a live server as a user would run it.</summary>
    [Collection(LiveServers.Name)]
    public sealed class VbSampleTests
    {
        private readonly Servers _servers;
        private readonly ITestOutputHelper _output;

        public VbSampleTests(Servers servers, ITestOutputHelper output)
        {
            _servers = servers;
            _output = output;
        }

        [Theory]
        [InlineData(false)]
        [InlineData(true)]
        public void The_sample_runs_the_add_in_flow(bool grpcWeb)
        {
            var user = _servers.NewUser("vb");
            var environment = new Dictionary<string, string>
            {
                ["CONTEXTD_ADDRESS"] = _servers.Plain.Address,
                ["CONTEXTD_USER"] = user,
            };
            if (grpcWeb)
            {
                // The path a .NET Framework 4.8 add-in takes.
                environment["CONTEXTD_GRPC_WEB_ADDRESS"] = "http://" + _servers.Plain.WebAddress;
            }

            var (exitCode, output) = RunSample(environment);
            _output.WriteLine(output);

            Assert.Equal(0, exitCode);
            var lines = output.Split('\n').Select(l => l.TrimEnd('\r')).ToList();
            Assert.Equal("contextd at " + (grpcWeb ? _servers.Plain.WebAddress : _servers.Plain.Address), lines[0]);
            var session = Regex.Match(output, "^session ([0-9a-f]+)$", RegexOptions.Multiline).Groups[1].Value;
            Assert.NotEmpty(session);
            Assert.Matches(@"^BuildMessages: 2 messages, \d+ of 4000 tokens$", lines[2]);
            Assert.Contains("  [scenario] included=", output);
            var answer = Assert.Single(lines, l => l.StartsWith("answer: ", StringComparison.Ordinal));
            Assert.Contains("(turn 1, ~", answer);
            Assert.Contains("echo: I received 2 messages", answer);
            Assert.Contains("Which formula sums column B where column A says \"Travel\"?", answer);
            Assert.Matches(@"^turn Ok in \d+ ms, prompt tokens \d+ \(estimate\)$", lines[lines.IndexOf(answer) + 1]);
            Assert.Matches(@"^collected [A-Za-z0-9_-]{22}: True, memory [A-Za-z0-9_-]{22}$", lines[lines.IndexOf(answer) + 2]);
            Assert.Equal("session ended: True", lines[lines.IndexOf(answer) + 3]);
            Assert.Contains("IChatClient: echo: I received 2 messages", output);
            Assert.Matches(@"conversation [0-9a-f]+, finish stop, tokens in \d+ out \d+", output);
            Assert.Contains("IChatClient, same conversation: echo: I received 4 messages", output);
            Assert.Matches(@"IChatReducer: kept \d+ of 14 messages, \d+ of 100 tokens", output);
            Assert.Matches(@"  dropped \d+ from 0: Budget", output);
            Assert.Equal("rejected as expected: token_budget", lines.Last(l => l.Length > 0));
        }

        private static (int ExitCode, string Output) RunSample(IDictionary<string, string> environment)
        {
            var sample = ContextdServer.Metadata("SampleAssembly");
            Assert.True(File.Exists(sample), sample + " is not built");
            // The runtime the tests run on (testhost is `dotnet testhost.dll`), else the one on PATH.
            var host = Environment.ProcessPath;
            var dotnet = host != null && Path.GetFileNameWithoutExtension(host) == "dotnet" ? host : "dotnet";
            var info = new ProcessStartInfo(dotnet)
            {
                RedirectStandardOutput = true,
                RedirectStandardError = true,
                UseShellExecute = false,
            };
            info.ArgumentList.Add(sample);
            foreach (var pair in environment)
            {
                info.Environment[pair.Key] = pair.Value;
            }
            using var process = Process.Start(info)!;
            var output = process.StandardOutput.ReadToEndAsync();
            var error = process.StandardError.ReadToEndAsync();
            if (!process.WaitForExit(120_000))
            {
                process.Kill(entireProcessTree: true);
                throw new TimeoutException("the sample did not finish in 120 s:\n" + output.Result + error.Result);
            }
            return (process.ExitCode, output.Result + error.Result);
        }
    }
}
