using System;
using System.Collections.Generic;
using System.Runtime.CompilerServices;
using System.Threading;
using System.Threading.Tasks;

namespace Contextd.Client
{
    /// <summary>
    /// A paginated list read page by page as it is enumerated: <c>await foreach</c> over the
    /// items, <see cref="AsPages"/> for the pages with their continuation tokens, or
    /// <see cref="ToListAsync"/> for every item at once (Visual Basic has no <c>Await For Each</c>).
    /// Each enumeration asks the server again from the first page asked for.
    /// </summary>
    /// <typeparam name="T">The listed item.</typeparam>
    public sealed class ContextdPageable<T> : IAsyncEnumerable<T>
    {
        private readonly Func<string?, CancellationToken, Task<ContextdPage<T>>> _fetch;
        private readonly CancellationToken _cancellationToken;

        internal ContextdPageable(Func<string?, CancellationToken, Task<ContextdPage<T>>> fetch, CancellationToken cancellationToken)
        {
            _fetch = fetch;
            _cancellationToken = cancellationToken;
        }

        /// <summary>
        /// The pages, from <paramref name="continuationToken"/> (a page's
        /// <see cref="ContextdPage{T}.ContinuationToken"/>) or, when it is null, from the
        /// request's own page token.
        /// </summary>
        public async IAsyncEnumerable<ContextdPage<T>> AsPages(
            string? continuationToken = null,
            [EnumeratorCancellation] CancellationToken cancellationToken = default)
        {
            using (var linked = Linked(cancellationToken))
            {
                var token = continuationToken;
                while (true)
                {
                    var page = await _fetch(token, linked.Token).ConfigureAwait(false);
                    yield return page;
                    if (page.ContinuationToken.Length == 0)
                    {
                        yield break;
                    }
                    token = page.ContinuationToken;
                }
            }
        }

        /// <summary>The items of every page, in order, fetched as enumeration reaches them.</summary>
        public async IAsyncEnumerator<T> GetAsyncEnumerator(CancellationToken cancellationToken = default)
        {
            await foreach (var page in AsPages(null, cancellationToken).ConfigureAwait(false))
            {
                foreach (var item in page.Values)
                {
                    yield return item;
                }
            }
        }

        /// <summary>Every item of every page, read to the last page.</summary>
        public async Task<IReadOnlyList<T>> ToListAsync(CancellationToken cancellationToken = default)
        {
            var items = new List<T>();
            await foreach (var page in AsPages(null, cancellationToken).ConfigureAwait(false))
            {
                items.AddRange(page.Values);
            }
            return items;
        }

        // The token given when the list was asked for, and the one given to the enumeration, both count.
        private CancellationTokenSource Linked(CancellationToken cancellationToken) =>
            CancellationTokenSource.CreateLinkedTokenSource(_cancellationToken, cancellationToken);
    }
}
