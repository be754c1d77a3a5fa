// Two overloads of one method, both hot (docs/java.md, tests/java_e2e.rs): a profile must show
// Overloads.mix(int) and Overloads.mix(long) as two frames, never one that looks recursive.
public class Overloads {
    static int mix(int x) {
        int h = x;
        for (int i = 0; i < 2000; i++) {
            h = h * 31 + (h >>> 7) + i;
        }
        return h;
    }

    static long mix(long x) {
        long h = x;
        for (int i = 0; i < 3000; i++) {
            h = h * 1_000_003L + (h >>> 11) + i;
        }
        return h;
    }

    public static void main(String[] args) {
        long seconds = args.length > 0 ? Long.parseLong(args[0]) : 2;
        long end = System.nanoTime() + seconds * 1_000_000_000L;
        long sum = 0;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 1000; i++) {
                sum += mix(i);
                sum += mix((long) i);
            }
        }
        System.out.println("sum " + sum);
    }
}
