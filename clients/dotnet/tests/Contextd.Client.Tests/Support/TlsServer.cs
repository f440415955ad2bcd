using System;
using System.Collections.Generic;
using System.IO;
using System.Threading;
using Contextd.V1;
using Xunit;

namespace Contextd.Client.Tests.Support
{
    public sealed class TlsServer : IDisposable
    {
        internal TlsServer(ContextdServer server, TestCertificates certificates, string key)
        {
            Server = server;
            Certificates = certificates;
            Key = key;
        }

        public ContextdServer Server { get; }

        public TestCertificates Certificates { get; }

        /// <summary>A key of user alice.</summary>
        public string Key { get; }

        public void Dispose()
        {
            Server.Dispose();
            Certificates.Dispose();
            var directory = Path.GetDirectoryName(Certificates.CertificateFile)!;
            Directory.Delete(directory, recursive: true);
        }
    }
}
