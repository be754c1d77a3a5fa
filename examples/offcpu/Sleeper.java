// A Java thread that waits a known time (docs/off-cpu.md): 500 naps of 2 ms in Thread.sleep,
// each through napOnce(), which HotSpot JIT-compiles after its first few hundred calls.
public class Sleeper {
    static void napOnce() throws InterruptedException {
        Thread.sleep(2);
    }

    static void sleepLoop(int naps) throws InterruptedException {
        for (int i = 0; i < naps; i++) {
            napOnce();
        }
    }

    public static void main(String[] args) throws Exception {
        long start = System.nanoTime();
        sleepLoop(args.length > 0 ? Integer.parseInt(args[0]) : 500);
        System.out.printf("waited %.1f ms%n", (System.nanoTime() - start) / 1e6);
    }
}
