using System;
using System.IO;
using System.Linq;
using System.Reflection.Metadata;
using System.Reflection.PortableExecutable;
using System.Text;
using Xunit;

namespace Contextd.Client.Tests
{
    /// <summary>What the library's build embeds: its PDB, with sources under mapped paths.</summary>
    public sealed class BuildTests
    {
        private static readonly Guid SourceLinkKind = new Guid("CC110556-A091-4D38-9FEC-25AB9A351A6A");

        [Fact]
        public void The_embedded_pdb_names_every_source_under_slash_underscore_and_no_local_path()
        {
            using var pdb = EmbeddedPdb();
            var reader = pdb.GetMetadataReader();
            var names = reader.Documents.Select(d => reader.GetString(reader.GetDocument(d).Name)).ToList();
            Assert.Contains(names, n => n == "/_/clients/dotnet/src/Contextd.Client/ContextdClient.cs");
            // Sources generated at build time (the protos' C#) live under obj/, mapped too.
            Assert.All(names, n => Assert.StartsWith("/_/", n));
            var root = Support.ContextdServer.RepositoryRoot.TrimEnd('/');
            Assert.DoesNotContain(names, n => n.Contains(root));
        }

        [Fact]
        public void Source_link_maps_the_sources_to_the_repository_when_the_clone_has_an_origin()
        {
            using var pdb = EmbeddedPdb();
            var reader = pdb.GetMetadataReader();
            var sourceLink = reader.CustomDebugInformation
                .Select(reader.GetCustomDebugInformation)
                .Where(c => reader.GetGuid(c.Kind) == SourceLinkKind)
                .Select(c => Encoding.UTF8.GetString(reader.GetBlobBytes(c.Value)))
                .SingleOrDefault();
            if (!HasHostedOrigin())
            {
                // A clone whose origin is no hosted repository (none, or a folder on this
                // machine): Source Link has no URL to map to.
                return;
            }
            Assert.NotNull(sourceLink);
            Assert.Contains("\"/_/*\"", sourceLink);
        }

        private static MetadataReaderProvider EmbeddedPdb()
        {
            var path = typeof(ContextdClient).Assembly.Location;
            using var pe = new PEReader(File.OpenRead(path));
            var entry = pe.ReadDebugDirectory().Single(e => e.Type == DebugDirectoryEntryType.EmbeddedPortablePdb);
            return pe.ReadEmbeddedPortablePdbDebugDirectoryData(entry);
        }

        private static bool HasHostedOrigin()
        {
            var info = new System.Diagnostics.ProcessStartInfo("git", "remote get-url origin")
            {
                RedirectStandardOutput = true,
                RedirectStandardError = true,
                WorkingDirectory = Support.ContextdServer.RepositoryRoot,
            };
            using var git = System.Diagnostics.Process.Start(info)!;
            var url = git.StandardOutput.ReadToEnd().Trim();
            git.WaitForExit();
            return git.ExitCode == 0 && IsHostedUrl(url);
        }

        // What Source Link can map: an https or ssh URL, or git's host:path form.
        private static bool IsHostedUrl(string url)
        {
            return url.StartsWith("https://", StringComparison.Ordinal)
                || url.StartsWith("http://", StringComparison.Ordinal)
                || url.StartsWith("ssh://", StringComparison.Ordinal)
                || System.Text.RegularExpressions.Regex.IsMatch(url, "^[^/@]+@[^/:]+:");
        }
    }
}
