using System.Collections.Generic;
using System.Linq;
using System.Threading.Tasks;
using Contextd.Client.Tests.Support;
using Contextd.V1;
using Xunit;

namespace Contextd.Client.Tests
{
    /// <summary>Every page of a list, through a pageable: items, pages and the whole list.</summary>
    [Collection(LiveServers.Name)]
    public sealed class PageableTests
    {
        private readonly Servers _servers;

        public PageableTests(Servers servers) => _servers = servers;

        [Theory]
        [MemberData(nameof(TransportData.All), MemberType = typeof(TransportData))]
        public async Task A_pageable_reads_every_page_and_leaves_the_request_alone(Transport transport)
        {
            using var client = Servers.Client(_servers.Plain, transport);
            var user = _servers.NewUser("pages");
            var created = new List<string>();
            for (var i = 0; i < 5; i++)
            {
                created.Add((await client.CreateSessionAsync(new CreateSessionRequest { UserId = user, Title = "s" + i })).Session.Id);
            }
            var request = new ListSessionsRequest { UserId = user, PageSize = 2 };

            var items = new List<string>();
            await foreach (var session in client.GetSessionsAsync(request))
            {
                items.Add(session.Id);
            }
            Assert.Equal(created.OrderBy(id => id), items.OrderBy(id => id));
            Assert.Equal(5, items.Distinct().Count());

            var pages = new List<ContextdPage<Session>>();
            await foreach (var page in client.GetSessionsAsync(request).AsPages())
            {
                pages.Add(page);
            }
            Assert.Equal(new[] { 2, 2, 1 }, pages.Select(p => p.Values.Count));
            Assert.All(pages.Take(2), p => Assert.NotEmpty(p.ContinuationToken));
            Assert.Empty(pages.Last().ContinuationToken);

            // From a page's token on: the pages after it.
            var rest = new List<ContextdPage<Session>>();
            await foreach (var page in client.GetSessionsAsync(request).AsPages(pages[0].ContinuationToken))
            {
                rest.Add(page);
            }
            Assert.Equal(pages.Skip(1).SelectMany(p => p.Values).Select(s => s.Id), rest.SelectMany(p => p.Values).Select(s => s.Id));

            Assert.Equal(items, (await client.GetSessionsAsync(request).ToListAsync()).Select(s => s.Id));
            Assert.Empty(request.PageToken);
        }

        [Fact]
        public async Task Messages_and_memories_page_the_same_way()
        {
            using var client = Servers.Client(_servers.Plain, Transport.Grpc);
            var user = _servers.NewUser("pages");
            var session = (await client.CreateSessionAsync(new CreateSessionRequest { UserId = user })).Session;
            var append = new AppendMessagesRequest { UserId = user, SessionId = session.Id };
            for (var i = 0; i < 3; i++)
            {
                append.Messages.Add(new Message { Role = Role.User, Content = "question " + i });
                append.Messages.Add(new Message { Role = Role.Assistant, Content = "answer " + i });
            }
            await client.AppendMessagesAsync(append);
            for (var i = 0; i < 3; i++)
            {
                await client.AddMemoryAsync(new AddMemoryRequest { UserId = user, Content = "Fact number " + i });
            }

            var messages = await client.GetMessagesAsync(new ListMessagesRequest { UserId = user, SessionId = session.Id, PageSize = 4 }).ToListAsync();
            Assert.Equal(Enumerable.Range(0, 6), messages.Select(m => m.Seq));
            var memories = await client.GetMemoriesAsync(new ListMemoriesRequest { UserId = user, PageSize = 2 }).ToListAsync();
            Assert.Equal(3, memories.Count);
            foreach (var memory in memories.Take(2))
            {
                await client.UpdateMemoryAsync(new UpdateMemoryRequest
                {
                    UserId = user,
                    MemoryId = memory.Id,
                    Memory = new Memory { Content = memory.Content + ", corrected" },
                    UpdateMask = new Google.Protobuf.WellKnownTypes.FieldMask { Paths = { "content" } },
                });
            }
            var changes = await client.GetMemoryHistoryAsync(new ListMemoryHistoryRequest { UserId = user, PageSize = 1 }).ToListAsync();
            Assert.True(changes.Count >= 2, "one change per page, every page read");
            Assert.Equal(changes.Select(c => c.Id).Distinct().Count(), changes.Count);
        }
    }
}
