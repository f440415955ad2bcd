using System;
using System.Collections.Concurrent;
using System.Threading;

namespace Contextd.Client.Tests.Support
{
    /// <summary>
    /// A UI thread's shape (WinForms, WPF, an Office add-in's): one thread that runs what is
    /// posted to its <see cref="SynchronizationContext"/>, one item at a time. An await that
    /// wants to come back to this context while the thread is blocked on it never resumes.
    /// </summary>
    public sealed class SingleThreadContext : SynchronizationContext, IDisposable
    {
        private readonly BlockingCollection<(SendOrPostCallback Callback, object? State)> _queue =
            new BlockingCollection<(SendOrPostCallback, object?)>();
        private readonly Thread _thread;

        public SingleThreadContext()
        {
            _thread = new Thread(Loop) { IsBackground = true, Name = "ui" };
            _thread.Start();
        }

        public override void Post(SendOrPostCallback d, object? state) => _queue.Add((d, state));

        public override void Send(SendOrPostCallback d, object? state) =>
            throw new NotSupportedException("a UI context's Send from another thread is not what this test is about");

        /// <summary>
        /// Runs <paramref name="work"/> on the UI thread and waits for it at most
        /// <paramref name="timeout"/>; false when it did not finish (it deadlocked).
        /// </summary>
        public bool Run(Action work, TimeSpan timeout, out Exception? failure)
        {
            Exception? caught = null;
            using var done = new ManualResetEventSlim();
            Post(_ =>
            {
                try
                {
                    work();
                }
                catch (Exception error)
                {
                    caught = error;
                }
                finally
                {
                    done.Set();
                }
            }, null);
            var finished = done.Wait(timeout);
            failure = caught;
            return finished;
        }

        private void Loop()
        {
            SetSynchronizationContext(this);
            foreach (var (callback, state) in _queue.GetConsumingEnumerable())
            {
                callback(state);
            }
        }

        public void Dispose() => _queue.CompleteAdding();
    }
}
