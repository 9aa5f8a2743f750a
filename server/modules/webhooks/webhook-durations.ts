const UNITS: [number, string][] = [
  [86_400_000, 'day'],
  [3_600_000, 'hour'],
  [60_000, 'minute'],
  [1000, 'second'],
];

/** `5 days`, `36 hours`, `90 seconds`: the largest unit that divides the duration. */
export function formatDuration(ms: number): string {
  for (const [size, unit] of UNITS) {
    if (ms >= size && ms % size === 0) {
      const n = ms / size;
      return `${n} ${unit}${n === 1 ? '' : 's'}`;
    }
  }
  return `${ms} ms`;
}
