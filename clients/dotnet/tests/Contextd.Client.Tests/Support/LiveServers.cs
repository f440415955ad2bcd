using System;
using System.Collections.Generic;
using System.IO;
using System.Threading;
using Contextd.V1;
using Xunit;

namespace Contextd.Client.Tests.Support
{
    [CollectionDefinition(Name)]
    public sealed class LiveServers : ICollectionFixture<Servers>
    {
        public const string Name = "live contextd";
    }
}
