package demo;

import demo.matrix.Matrix;

/**
 * jprof's Java demo: multiplies matrices for about two seconds (or the number of seconds given
 * as the first argument). {@code Matrix.multiply} is hot and {@code Matrix.dot} is inlined into
 * it by C2, so a profile shows dot as an inlined frame under multiply.
 */
public final class App {
    public static void main(String[] args) {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 2.0;
        long end = System.nanoTime() + (long) (seconds * 1e9);
        Matrix m = new Matrix(96, 1);
        Matrix acc = new Matrix(96, 2);
        double check = 0;
        int rounds = 0;
        while (System.nanoTime() < end) {
            acc = m.multiply(acc);
            check += acc.trace();
            acc = new Matrix(96, rounds++);
        }
        System.out.println("rounds " + rounds + " check " + (check > 0));
    }
}
