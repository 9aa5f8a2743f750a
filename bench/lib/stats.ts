// Figures of the benches' own samples.

/** The `p`-th percentile of `sorted` (ascending): the sample at rank ⌊p/100 × n⌋, the last for p = 100; NaN if none. */
export function percentile(sorted: readonly number[], p: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! : NaN;
}

/** The median of `xs` (any order): the upper one of an even count. */
export function median(xs: readonly number[]): number {
  return percentile(
    [...xs].sort((a, b) => a - b),
    50,
  );
}
