/** One line of a diff: in both texts, only the old one, or only the new one. */
export interface DiffLine {
  kind: "same" | "removed" | "added";
  text: string;
  /** 1-based line numbers; 0 on the side that lacks the line. */
  oldLine: number;
  newLine: number;
}

export interface LineDiff {
  /** Runs of changes with up to `context` unchanged lines around them. */
  hunks: DiffLine[][];
  added: number;
  removed: number;
}

/** Beyond this many differing lines the diff gives up on alignment and replaces the rest whole. */
const maxEditDistance = 1000;

function splitLines(text: string): string[] {
  if (text === "") return [];
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  return lines;
}

/**
 * A line diff of two texts by Myers' algorithm ("An O(ND) Difference Algorithm
 * and Its Variations", 1986): the shortest edit script, found in time
 * proportional to the texts' length times the number of differences, so two
 * revisions of a large configuration that differ in a few lines diff quickly.
 */
export function diffLines(oldText: string, newText: string, context = 3): LineDiff {
  const a = splitLines(oldText);
  const b = splitLines(newText);
  // Common head and tail need no search.
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  const middle = editScript(a.slice(head, a.length - tail), b.slice(head, b.length - tail));

  const lines: DiffLine[] = [];
  for (let i = 0; i < head; i++) lines.push({ kind: "same", text: a[i] as string, oldLine: i + 1, newLine: i + 1 });
  let oldLine = head;
  let newLine = head;
  for (const op of middle) {
    if (op.kind === "same") lines.push({ kind: "same", text: op.text, oldLine: ++oldLine, newLine: ++newLine });
    else if (op.kind === "removed") lines.push({ kind: "removed", text: op.text, oldLine: ++oldLine, newLine: 0 });
    else lines.push({ kind: "added", text: op.text, oldLine: 0, newLine: ++newLine });
  }
  for (let i = a.length - tail; i < a.length; i++)
    lines.push({ kind: "same", text: a[i] as string, oldLine: ++oldLine, newLine: ++newLine });

  let added = 0;
  let removed = 0;
  for (const line of lines) {
    if (line.kind === "added") added++;
    else if (line.kind === "removed") removed++;
  }
  return { hunks: groupHunks(lines, context), added, removed };
}

type Op = { kind: DiffLine["kind"]; text: string };

function editScript(a: string[], b: string[]): Op[] {
  const n = a.length;
  const m = b.length;
  if (n === 0) return b.map((text) => ({ kind: "added", text }));
  if (m === 0) return a.map((text) => ({ kind: "removed", text }));
  const max = Math.min(n + m, maxEditDistance);
  const offset = max + 1;
  const v = new Int32Array(2 * max + 3);
  const trace: Int32Array[] = [];
  let found = -1;
  for (let d = 0; d <= max && found < 0; d++) {
    trace.push(v.slice());
    for (let k = -d; k <= d; k += 2) {
      let x =
        k === -d || (k !== d && (v[offset + k - 1] as number) < (v[offset + k + 1] as number))
          ? (v[offset + k + 1] as number)
          : (v[offset + k - 1] as number) + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      v[offset + k] = x;
      if (x >= n && y >= m) {
        found = d;
        break;
      }
    }
  }
  if (found < 0) {
    // Too different to align cheaply: all of the old, then all of the new.
    return [...a.map((text): Op => ({ kind: "removed", text })), ...b.map((text): Op => ({ kind: "added", text }))];
  }
  // Walk the trace back from (n, m) to (0, 0).
  const ops: Op[] = [];
  let x = n;
  let y = m;
  for (let d = found; d > 0; d--) {
    const vd = trace[d] as Int32Array;
    const k = x - y;
    const down = k === -d || (k !== d && (vd[offset + k - 1] as number) < (vd[offset + k + 1] as number));
    const prevK = down ? k + 1 : k - 1;
    const prevX = vd[offset + prevK] as number;
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) {
      y--;
      ops.push({ kind: "same", text: a[--x] as string });
    }
    if (down) ops.push({ kind: "added", text: b[--y] as string });
    else ops.push({ kind: "removed", text: a[--x] as string });
  }
  while (x > 0 && y > 0) {
    y--;
    ops.push({ kind: "same", text: a[--x] as string });
  }
  return ops.reverse();
}

function groupHunks(lines: DiffLine[], context: number): DiffLine[][] {
  const hunks: DiffLine[][] = [];
  let current: DiffLine[] | null = null;
  let lastChange = -Infinity;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as DiffLine;
    if (line.kind === "same") continue;
    const start = Math.max(0, i - context);
    if (current && start <= lastChange + context + 1) {
      for (let j = lastChange + 1; j <= i; j++) current.push(lines[j] as DiffLine);
    } else {
      if (current) current.push(...lines.slice(lastChange + 1, Math.min(lines.length, lastChange + 1 + context)));
      current = lines.slice(start, i + 1);
      hunks.push(current);
    }
    lastChange = i;
  }
  if (current) current.push(...lines.slice(lastChange + 1, Math.min(lines.length, lastChange + 1 + context)));
  return hunks;
}
