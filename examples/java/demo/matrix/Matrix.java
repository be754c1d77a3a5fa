package demo.matrix;

/** A dense square matrix; {@link #multiply} calls {@link #dot}, which C2 inlines. */
public final class Matrix {
    final int n;
    final double[] a;

    public Matrix(int n, long seed) {
        this.n = n;
        this.a = new double[n * n];
        long x = seed;
        for (int i = 0; i < a.length; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
            a[i] = ((x >>> 11) % 1000) / 1000.0;
        }
    }

    /** Row {@code row} of this times column {@code col} of {@code other}. */
    static double dot(Matrix m, Matrix other, int row, int col) {
        double sum = 0;
        int n = m.n;
        for (int k = 0; k < n; k++) {
            sum += m.a[row * n + k] * other.a[k * n + col];
        }
        return sum;
    }

    public Matrix multiply(Matrix other) {
        Matrix out = new Matrix(n, 0);
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < n; j++) {
                out.a[i * n + j] = dot(this, other, i, j);
            }
        }
        return out;
    }

    public double trace() {
        double t = 0;
        for (int i = 0; i < n; i++) {
            t += a[i * n + i];
        }
        return t;
    }
}
