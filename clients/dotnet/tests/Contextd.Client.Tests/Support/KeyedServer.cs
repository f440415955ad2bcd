using System;
using System.Collections.Generic;
using System.IO;
using System.Threading;
using Contextd.V1;
using Xunit;

namespace Contextd.Client.Tests.Support
{
    public sealed class KeyedServer : IDisposable
    {
        internal KeyedServer(ContextdServer server, string alice, string bob)
        {
            Server = server;
            Alice = alice;
            Bob = bob;
        }

        public ContextdServer Server { get; }

        /// <summary>A key of user alice.</summary>
        public string Alice { get; }

        /// <summary>A key of user bob.</summary>
        public string Bob { get; }

        public void Dispose() => Server.Dispose();
    }
}
