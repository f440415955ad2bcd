using System;
using System.Collections.Generic;
using System.IO;
using System.Threading;
using Contextd.V1;
using Xunit;

namespace Contextd.Client.Tests.Support
{
    public sealed class ModelServer : IDisposable
    {
        internal ModelServer(ContextdServer server, FakeOpenAi model)
        {
            Server = server;
            Model = model;
        }

        public ContextdServer Server { get; }

        public FakeOpenAi Model { get; }

        public void Dispose()
        {
            Server.Dispose();
            Model.DisposeAsync().AsTask().GetAwaiter().GetResult();
        }
    }
}
