// A stack deeper than the kernel's largest user stack copy (64 KiB) and its callchain limit
// (127 frames): main → descend × DEPTH → spin, run interpreted (-Xint) so every frame is an
// interpreter frame with its Method* (docs/java.md, tests/suite/java_e2e.rs).
public class Deep {
    static long spin(long seed) {
        long h = seed;
        for (int i = 0; i < 200_000; i++) {
            h = h * 31 + (h >>> 7) + i;
        }
        return h;
    }

    static long descend(int depth, long seed) {
        // Locals make the interpreter frame larger, as real code's are.
        long a = seed + depth, b = a * 3, c = b ^ a, d = c + depth;
        if (depth == 0) {
            return spin(a + b + c + d);
        }
        return descend(depth - 1, seed) + (a & 1);
    }

    /** {@code Deep DEPTH SECONDS}: runs for SECONDS of its main thread's CPU time (not wall
     * time: on a loaded machine it still gets as many samples). */
    public static void main(String[] args) {
        int depth = Integer.parseInt(args[0]);
        long seconds = Long.parseLong(args[1]);
        java.lang.management.ThreadMXBean cpu =
                java.lang.management.ManagementFactory.getThreadMXBean();
        long end = cpu.getCurrentThreadCpuTime() + seconds * 1_000_000_000L;
        long sum = 0;
        while (cpu.getCurrentThreadCpuTime() < end) {
            sum += descend(depth, sum);
        }
        System.out.println("sum " + sum);
    }
}
