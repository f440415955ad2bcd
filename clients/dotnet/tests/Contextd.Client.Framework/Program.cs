using System;
using System.Threading;
using System.Threading.Tasks;
using Contextd.Client;
using Contextd.V1;
using Grpc.Core;

namespace Contextd.Client.Framework
{
    /// <summary>
    /// On .NET Framework, over gRPC-Web (argument: the server's web address): a session,
    /// BuildMessages from it, a streamed turn read to its end, a turn cancelled midway and a
    /// typed error. Prints one line per step; exits 1 on the first that goes wrong.
    /// </summary>
    internal static class Program
    {
        private static async Task<int> Main(string[] args)
        {
            var options = new ContextdClientOptions { UseGrpcWeb = true, GrpcWebAddress = args[0] };
            using (var client = new ContextdClient(args[0], options))
            {
                Console.WriteLine("runtime: " + Environment.Version + (Type.GetType("Mono.Runtime") != null ? " (Mono)" : ""));
                var user = "framework-" + Guid.NewGuid().ToString("N");
                var session = (await client.CreateSessionAsync(new CreateSessionRequest { UserId = user })).Session;
                Console.WriteLine("session: " + session.Id);

                var turn = new StreamChatRequest
                {
                    Session = new SessionContext { UserId = user, SessionId = session.Id },
                    UserMessage = "Which formula sums column B?",
                };
                var deltas = 0;
                TurnCompleted? completed = null;
                await foreach (var item in client.StreamChatAsync(turn))
                {
                    deltas += item.EventCase == StreamChatResponse.EventOneofCase.TextDelta ? 1 : 0;
                    completed = item.TurnCompleted ?? completed;
                }
                Console.WriteLine("turn: " + completed?.Status + " after " + deltas + " deltas");

                var build = new BuildMessagesRequest
                {
                    Session = new SessionContext { UserId = user, SessionId = session.Id },
                    UserMessage = "And column C?",
                    TokenBudget = 2000,
                };
                var built = await client.BuildMessagesAsync(build);
                Console.WriteLine("built: " + built.Messages.Count + " messages");

                var longer = new StreamChatRequest
                {
                    Session = new SessionContext { UserId = user, SessionId = session.Id },
                    UserMessage = string.Join(" ", new string[200]).Replace(" ", "word "),
                };
                using (var cancel = new CancellationTokenSource())
                {
                    var read = 0;
                    try
                    {
                        await client.RunChatTurnAsync(longer, e =>
                        {
                            if (e.EventCase == StreamChatResponse.EventOneofCase.TextDelta && ++read == 1)
                            {
                                cancel.Cancel();
                            }
                        }, cancel.Token);
                        Console.WriteLine("cancel: the turn was not cancelled");
                        return 1;
                    }
                    catch (OperationCanceledException)
                    {
                        Console.WriteLine("cancelled: after " + read + " delta");
                    }
                }

                try
                {
                    await client.GetSessionAsync(new GetSessionRequest { UserId = user, SessionId = "no-such-session" });
                    Console.WriteLine("error: none");
                    return 1;
                }
                catch (ContextdException error) when (error.StatusCode == StatusCode.NotFound)
                {
                    Console.WriteLine("error: " + error.StatusCode);
                }
            }
            return 0;
        }
    }
}
