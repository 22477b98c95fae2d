import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript-compiler';
import { describe, expect, it } from 'vitest';

// The stages of src/ stack: each folder imports only the folders below it, in
// the order docs/code-map.md writes down ("Stages, in import order"), and the
// files of one folder import each other without a loop. The order and each
// stage's imports are read from that page, so the page and the code cannot
// drift apart: a new arrow, upward or not, is a change of the map too.

const ROOT = path.resolve(import.meta.dirname, '../..');
const SRC = path.join(ROOT, 'src');
/** The stage of the files directly in src/ (errors.ts, interfaces.ts, version.ts). */
const TOP_FILES = 'src/*.ts';

interface StageRow {
  readonly stage: string;
  /** The stages it imports, as the map lists them. */
  readonly imports: ReadonlySet<string>;
}

/**
 * The rows of the map's table, top stage first: the first cell names the
 * stage (`src/x/`), the last the stages it imports (`x`, comma-separated;
 * `-` for none).
 */
function stageRows(): StageRow[] {
  const page = readFileSync(path.join(ROOT, 'docs/code-map.md'), 'utf8');
  const section = /^## Stages, in import order\n([\s\S]*?)(?=^## |$(?![\s\S]))/m.exec(page);
  if (section === null) throw new Error('docs/code-map.md has no section "## Stages, in import order"');
  const rows: StageRow[] = [];
  for (const line of section[1]!.split('\n')) {
    const cells = /^\|\s*`(src\/[^`]*)`\s*\|.*\|\s*([^|]*?)\s*\|$/.exec(line);
    if (cells === null) continue;
    const stage = cells[1] === TOP_FILES ? TOP_FILES : cells[1]!.replace(/^src\/|\/$/g, '');
    const listed = cells[2]!.replace(/`/g, '');
    rows.push({
      stage,
      imports: new Set(listed === '-' ? [] : listed.split(',').map((name) => name.trim())),
    });
  }
  return rows;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

/** The stage a file of src/ belongs to: its folder under src/, or TOP_FILES. */
function stageOf(file: string): string {
  const parts = path.relative(SRC, file).split(path.sep);
  return parts.length === 1 ? TOP_FILES : parts[0]!;
}

interface Arrow {
  readonly from: string;
  readonly to: string;
  /** As written in `from`. */
  readonly specifier: string;
}

/**
 * Every relative import of src/ (static, type-only, re-exports and dynamic
 * `import()` alike, as the compiler's own pre-processing finds them), resolved
 * to the .ts file it names.
 */
function arrows(): Arrow[] {
  return sourceFiles(SRC).flatMap((file) =>
    ts
      .preProcessFile(readFileSync(file, 'utf8'), true, true)
      .importedFiles.filter(({ fileName }) => fileName.startsWith('.'))
      .map(({ fileName }) => ({
        from: file,
        to: path.resolve(path.dirname(file), fileName).replace(/\.js$/, '.ts'),
        specifier: fileName,
      })),
  );
}

const where = (file: string): string => path.relative(ROOT, file);

describe('the stages of src/, as docs/code-map.md orders them', () => {
  const rows = stageRows();
  const order = rows.map((row) => row.stage).reverse(); // bottom first
  const all = arrows();

  it('lists every folder of src/ once, and nothing else', () => {
    const folders = readdirSync(SRC, { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => entry.name);
    expect([...order].sort()).toEqual([...folders, TOP_FILES].sort());
  });

  it('has no arrow up the order: each stage imports only the stages below it', () => {
    const upward = all.flatMap(({ from, to, specifier }) => {
      const [a, b] = [stageOf(from), stageOf(to)];
      if (!to.startsWith(SRC + path.sep)) return [`${where(from)} imports ${specifier}, outside src/`];
      if (a === b || order.indexOf(b) < order.indexOf(a)) return [];
      return [`${where(from)} imports ${specifier}: ${a} may import only the stages below it, and ${b} is not`];
    });
    expect(upward).toEqual([]);
  });

  it("states each stage's imports as the code has them", () => {
    const found = new Map<string, Set<string>>(order.map((stage) => [stage, new Set<string>()]));
    for (const { from, to } of all) if (stageOf(from) !== stageOf(to)) found.get(stageOf(from))?.add(stageOf(to));
    const differ = rows.flatMap(({ stage, imports }) => {
      const actual = order.filter((name) => found.get(stage)?.has(name)).reverse();
      const listed = order.filter((name) => imports.has(name)).reverse();
      const unknown = [...imports].filter((name) => !order.includes(name));
      return actual.join(', ') === listed.join(', ') && unknown.length === 0
        ? []
        : [`${stage}: the map lists ${[...imports].join(', ') || '-'}, the code imports ${actual.join(', ') || '-'}`];
    });
    expect(differ).toEqual([]);
  });

  it('has no loop among the files of one stage', () => {
    const edges = new Map<string, string[]>();
    for (const { from, to } of all)
      if (stageOf(from) === stageOf(to)) edges.set(from, [...(edges.get(from) ?? []), to]);
    const loops: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const visit = (file: string, trail: string[]): void => {
      if (state.get(file) === 'done') return;
      if (state.get(file) === 'open') {
        loops.push([...trail.slice(trail.indexOf(file)), file].map(where).join(' -> '));
        return;
      }
      state.set(file, 'open');
      for (const next of edges.get(file) ?? []) visit(next, [...trail, file]);
      state.set(file, 'done');
    };
    for (const file of edges.keys()) visit(file, []);
    expect(loops).toEqual([]);
  });
});
