using System;
using System.Collections.Generic;
using System.IO;
using System.Threading;
using Contextd.V1;
using Xunit;

namespace Contextd.Client.Tests.Support
{
    public static class TransportData
    {
        /// <summary>Every transport, for a [Theory]'s MemberData.</summary>
        public static TheoryData<Transport> All => new TheoryData<Transport> { Transport.Grpc, Transport.GrpcWebText, Transport.GrpcWeb };
    }
}
