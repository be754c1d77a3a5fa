// A small CPU-bound C# program for jprof's Mono tests: Main -> HotMath.Run -> Mixer.Round ->
// HotMath.LeafMix, on the main thread and one worker named "hot-worker". The loop count comes
// from the first argument (default 20000000).
using System;
using System.Runtime.CompilerServices;
using System.Threading;

namespace JprofFixture
{
    static class HotMath
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static ulong LeafMix(ulong x)
        {
            for (int i = 0; i < 64; i++)
            {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
            }
            return x;
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static ulong Run(long rounds, ulong seed)
        {
            ulong acc = seed;
            for (long i = 0; i < rounds; i++)
                acc = Mixer.Round(acc, (ulong)i);
            return acc;
        }
    }

    static class Mixer
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static ulong Round(ulong acc, ulong i)
        {
            return HotMath.LeafMix(acc + i) ^ (acc >> 3);
        }
    }

    static class Program
    {
        static int Main(string[] args)
        {
            long rounds = args.Length > 0 ? long.Parse(args[0]) : 20000000;
            ulong workerResult = 0;
            var worker = new Thread(() => { workerResult = HotMath.Run(rounds, 7); });
            worker.Name = "hot-worker";
            worker.Start();
            ulong mainResult = HotMath.Run(rounds, 3);
            worker.Join();
            Console.WriteLine("hot done {0}", mainResult ^ workerResult);
            return 0;
        }
    }
}
