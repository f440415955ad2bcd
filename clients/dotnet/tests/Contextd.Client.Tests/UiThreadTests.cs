using System;
using System.Collections.Generic;
using System.Linq;
using System.Reflection;
using System.Threading;
using System.Threading.Tasks;
using Contextd.Client.Tests.Support;
using Contextd.V1;
using Microsoft.Extensions.AI;
using Xunit;

namespace Contextd.Client.Tests
{
    /// <summary>
    /// Every public async method, blocked on with <c>.Result</c> / <c>GetAwaiter().GetResult()</c>
    /// on a single-threaded <see cref="SynchronizationContext"/> (a UI thread's shape): an await
    /// in the library without <c>ConfigureAwait(false)</c> would wait for that blocked thread
    /// forever. Each call must come back, answered or refused by the server.
    /// </summary>
    [Collection(LiveServers.Name)]
    public sealed class UiThreadTests
    {
        private static readonly TimeSpan Patience = TimeSpan.FromSeconds(30);
        private readonly Servers _servers;

        public UiThreadTests(Servers servers) => _servers = servers;

        [Theory]
        [MemberData(nameof(TransportData.All), MemberType = typeof(TransportData))]
        public async Task Every_async_method_returns_when_blocked_on_from_a_ui_thread(Transport transport)
        {
            using var client = Servers.Client(_servers.Plain, transport);
            var user = _servers.NewUser("ui");
            var session = (await client.CreateSessionAsync(new CreateSessionRequest { UserId = user })).Session;
            var ran = new List<string>();
            using var ui = new SingleThreadContext();

            var methods = typeof(IContextdClient).GetMethods().OrderBy(m => m.Name).ToList();
            foreach (var method in methods)
            {
                // The arguments are made on the UI thread too: a Progress made there reports there.
                Block(ui, method.Name, () => Complete(method.Invoke(client, Arguments(method, user, session.Id))));
                ran.Add(method.Name);
            }

            // Microsoft.Extensions.AI's interfaces over the same client.
            var chat = new ContextdChatClient(client, new ContextdChatClientOptions { UserId = user });
            Block(ui, "GetResponseAsync", () => Assert.NotEmpty(chat.GetResponseAsync("hello from the UI thread").Result.Text));
            Block(ui, "GetStreamingResponseAsync", () => Assert.NotEmpty(Drain(chat.GetStreamingResponseAsync("hello again"))));
            var reducer = new ContextdChatReducer(client, new ContextdChatReducerOptions { TokenBudget = 1000 });
            Block(ui, "ReduceAsync", () => Assert.NotEmpty(reducer.ReduceAsync(new[] { new ChatMessage(ChatRole.User, "hi") }, default).Result));

            // Every method of the interface ran, the streams and the pageables among them.
            Assert.Equal(methods.Count, ran.Count);
            Assert.Contains("StreamChatAsync", ran);
            Assert.Contains("RunChatTurnAsync", ran);
            Assert.Contains("ExportEventsAsync", ran);
            Assert.Contains("GetSessionsAsync", ran);
            Assert.True(ran.Count >= 35, string.Join(", ", ran));
        }

        private static void Block(SingleThreadContext ui, string name, Action work)
        {
            var finished = ui.Run(() =>
            {
                Assert.Same(ui, SynchronizationContext.Current);
                try
                {
                    work();
                }
                catch (Exception error) when (Unwrapped(error) is ContextdException)
                {
                    // Refused by the server (a request left empty): the await came back all the same.
                }
            }, Patience, out var failure);
            Assert.True(finished, name + " blocked on a UI thread did not return: it waits for the blocked thread");
            if (failure != null)
            {
                throw new Xunit.Sdk.XunitException(name + " failed: " + Unwrapped(failure));
            }
        }

        // A Task is blocked on; a stream or a pageable is read to its end, each step blocked on.
        private static void Complete(object? result)
        {
            switch (result)
            {
                case Task task:
                    task.GetAwaiter().GetResult();
                    break;
                case null:
                    throw new InvalidOperationException("a public method returned nothing");
                default:
                    var item = result.GetType().GetInterfaces()
                        .Single(i => i.IsGenericType && i.GetGenericTypeDefinition() == typeof(IAsyncEnumerable<>))
                        .GetGenericArguments()[0];
                    typeof(UiThreadTests).GetMethod(nameof(Drain), BindingFlags.NonPublic | BindingFlags.Static)!
                        .MakeGenericMethod(item)
                        .Invoke(null, new[] { result });
                    if (result.GetType().GetMethod("ToListAsync") is MethodInfo toList)
                    {
                        ((Task)toList.Invoke(result, new object[] { CancellationToken.None })!).GetAwaiter().GetResult();
                    }
                    break;
            }
        }

        private static List<T> Drain<T>(IAsyncEnumerable<T> items)
        {
            var read = new List<T>();
            var enumerator = items.GetAsyncEnumerator();
            try
            {
                while (enumerator.MoveNextAsync().AsTask().Result)
                {
                    read.Add(enumerator.Current);
                }
            }
            finally
            {
                enumerator.DisposeAsync().AsTask().GetAwaiter().GetResult();
            }
            return read;
        }

        // A request of the parameter's type, for this user and session where it has those fields.
        private static object?[] Arguments(MethodInfo method, string user, string sessionId)
        {
            return method.GetParameters().Select(parameter =>
            {
                var type = parameter.ParameterType;
                if (type == typeof(CancellationToken))
                {
                    return CancellationToken.None;
                }
                if (type == typeof(StreamChatRequest))
                {
                    return Requests.Turn(user, "hello from the UI thread", sessionId);
                }
                if (type == typeof(Action<StreamChatResponse>))
                {
                    return new Action<StreamChatResponse>(_ => { });
                }
                if (type == typeof(IProgress<StreamChatResponse>))
                {
                    // Made on the UI thread: its handler is posted back there, in order.
                    return new Progress<StreamChatResponse>(_ => { });
                }
                var request = Activator.CreateInstance(type)!;
                type.GetProperty("UserId")?.SetValue(request, user);
                type.GetProperty("SessionId")?.SetValue(request, sessionId);
                return request;
            }).ToArray();
        }

        private static Exception Unwrapped(Exception error)
        {
            while ((error is AggregateException || error is TargetInvocationException) && error.InnerException != null)
            {
                error = error.InnerException;
            }
            return error;
        }
    }
}
