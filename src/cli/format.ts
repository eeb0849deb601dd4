/** Columns aligned with two spaces; the last column is not padded. */
export function formatTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  if (rows.length === 0) return "";
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((row) => (row[i] ?? "").length)));
  return all
    .map((row) =>
      row
        .map((cell, i) => (i < row.length - 1 ? cell.padEnd(widths[i] as number) : cell))
        .join("  ")
        .trimEnd(),
    )
    .map((line) => `${line}\n`)
    .join("");
}

/** `key  value` lines, keys padded to one width. */
export function formatRecord(record: Readonly<Record<string, string>>): string {
  const width = Math.max(...Object.keys(record).map((k) => k.length));
  return Object.entries(record)
    .map(([k, v]) => `${k.padEnd(width)}  ${v}\n`)
    .join("");
}
