using System;
using System.IO;
using System.Net;
using System.Net.Http;
using System.Net.Security;
using System.Security.Cryptography;
using System.Security.Cryptography.X509Certificates;

namespace Contextd.Client.Tests.Support
{
    /// <summary>
    /// A certificate authority made for the test run and a server certificate it signed for
    /// 127.0.0.1 and localhost, written as the PEM files <c>contextd serve --tls-cert --tls-key</c> reads.
    /// </summary>
    public sealed class TestCertificates : IDisposable
    {
        private TestCertificates(X509Certificate2 authority, string certificateFile, string keyFile)
        {
            Authority = authority;
            CertificateFile = certificateFile;
            KeyFile = keyFile;
        }

        public X509Certificate2 Authority { get; }

        public string CertificateFile { get; }

        public string KeyFile { get; }

        public static TestCertificates Create(string directory)
        {
            using var authorityKey = ECDsa.Create(ECCurve.NamedCurves.nistP256);
            var authorityRequest = new CertificateRequest("CN=contextd test CA", authorityKey, HashAlgorithmName.SHA256);
            authorityRequest.CertificateExtensions.Add(new X509BasicConstraintsExtension(true, false, 0, true));
            authorityRequest.CertificateExtensions.Add(
                new X509KeyUsageExtension(X509KeyUsageFlags.KeyCertSign | X509KeyUsageFlags.CrlSign, true));
            var now = DateTimeOffset.UtcNow;
            var authority = authorityRequest.CreateSelfSigned(now.AddMinutes(-5), now.AddDays(1));

            using var serverKey = ECDsa.Create(ECCurve.NamedCurves.nistP256);
            var serverRequest = new CertificateRequest("CN=localhost", serverKey, HashAlgorithmName.SHA256);
            var names = new SubjectAlternativeNameBuilder();
            names.AddDnsName("localhost");
            names.AddIpAddress(IPAddress.Loopback);
            serverRequest.CertificateExtensions.Add(names.Build());
            serverRequest.CertificateExtensions.Add(new X509BasicConstraintsExtension(false, false, 0, true));
            serverRequest.CertificateExtensions.Add(
                new X509EnhancedKeyUsageExtension(new OidCollection { new Oid("1.3.6.1.5.5.7.3.1") }, false));
            var serial = new byte[12];
            RandomNumberGenerator.Fill(serial);
            using var server = serverRequest.Create(authority, now.AddMinutes(-5), now.AddDays(1), serial);

            Directory.CreateDirectory(directory);
            var certificateFile = Path.Combine(directory, "server.pem");
            var keyFile = Path.Combine(directory, "server-key.pem");
            File.WriteAllText(certificateFile, server.ExportCertificatePem());
            File.WriteAllText(keyFile, serverKey.ExportPkcs8PrivateKeyPem());
            return new TestCertificates(authority, certificateFile, keyFile);
        }

        /// <summary>An HTTP handler that trusts the test authority, and nothing else.</summary>
        public HttpClientHandler TrustingHandler() => new HttpClientHandler
        {
            ServerCertificateCustomValidationCallback = (_, certificate, _, errors) => IsTrusted(certificate, errors),
        };

        private bool IsTrusted(X509Certificate2? certificate, SslPolicyErrors errors)
        {
            // The name must match; only the chain is judged here, against the test authority.
            if (certificate == null || (errors & ~SslPolicyErrors.RemoteCertificateChainErrors) != 0)
            {
                return false;
            }
            using var chain = new X509Chain();
            chain.ChainPolicy.TrustMode = X509ChainTrustMode.CustomRootTrust;
            chain.ChainPolicy.CustomTrustStore.Add(Authority);
            chain.ChainPolicy.RevocationMode = X509RevocationMode.NoCheck;
            return chain.Build(certificate);
        }

        public void Dispose() => Authority.Dispose();
    }
}
