import { CST, Lexer } from 'yaml';
import { UserError } from '../errors.js';

/**
 * How deep collections may nest (a list in a mapping in a list ...). A valid
 * document nests about eight deep; parsing cost and the parser's stack grow
 * with depth, so a deeper document is refused before it is parsed.
 */
export const MAX_DOCUMENT_DEPTH = 64;
/**
 * How many values, keys, indicators (`-`, `:`, `?`) and separators (`,`, brackets)
 * a document may hold. Parsing costs time and memory per such item, far more
 * than per byte: a document within the byte limit made of nothing but tiny
 * values, or of empty entries (`[,,,]`, each a parse error), would take many
 * seconds to parse.
 */
export const MAX_DOCUMENT_NODES = 200_000;
/** How many lines a document may have: the parser costs time per line, blank or comment. */
export const MAX_DOCUMENT_LINES = 200_000;

/**
 * Refuses, before it is parsed, a document nested deeper than
 * MAX_DOCUMENT_DEPTH, holding more than MAX_DOCUMENT_NODES items or having more
 * than MAX_DOCUMENT_LINES lines. Reads the
 * library's lexer, which quotes and comments exactly as its parser does (a
 * bracket inside a quoted string is no collection), and stops at the first
 * limit passed, so a refusal costs about as much as the document up to it.
 * Depth is estimated from above: flow brackets open, plus the indentation
 * levels of the block lines around, plus the block indicators (`-`, `?`,
 * `:`) on the line.
 */
export function assertOrdinaryShape(text: string, sourceName: string): void {
  let offset = 0;
  let nodes = 0;
  let lines = 1;
  let flowDepth = 0;
  let onLine = 0;
  let indentation = 0;
  let lineStart = true;
  let scalarFollows = false;
  const indents: number[] = [];
  const refuse = (problem: string): never => {
    const before = text.slice(0, offset);
    const line = before.split('\n').length;
    const col = offset - before.lastIndexOf('\n');
    throw new UserError('config_invalid', `${sourceName}:${line}:${col}: ${problem}`);
  };
  for (const token of new Lexer().lex(text)) {
    const at = offset;
    const type = scalarFollows ? null : CST.tokenType(token);
    // The lexer's markers (document mode, a scalar follows, the end of a broken flow collection) are not in the text.
    if (type !== 'doc-mode' && type !== 'scalar' && type !== 'flow-error-end') offset += token.length;
    if (scalarFollows) {
      // A scalar's content, whatever the lexer calls it.
      scalarFollows = false;
      continue;
    }
    if (type === 'newline') {
      lines += 1;
      if (lines > MAX_DOCUMENT_LINES) refuse(`expected a document of at most ${MAX_DOCUMENT_LINES} lines, got more`);
      lineStart = true;
      indentation = 0;
      onLine = 0;
      continue;
    }
    if (type === 'space' || type === 'comment' || type === 'doc-mode' || type === 'byte-order-mark') {
      if (type === 'space' && lineStart) indentation = token.length;
      continue;
    }
    if (lineStart && flowDepth === 0) {
      while (indents.length > 0 && indents[indents.length - 1]! >= indentation) indents.pop();
      indents.push(indentation);
    }
    lineStart = false;
    nodes += 1;
    switch (type) {
      case 'scalar':
        scalarFollows = true;
        break;
      case 'flow-seq-start':
      case 'flow-map-start':
        flowDepth += 1;
        break;
      case 'flow-seq-end':
      case 'flow-map-end':
        flowDepth = Math.max(0, flowDepth - 1);
        break;
      case 'seq-item-ind':
      case 'explicit-key-ind':
      case 'map-value-ind':
        if (flowDepth === 0) onLine += 1;
        break;
      default:
        break;
    }
    if (indents.length + onLine + flowDepth > MAX_DOCUMENT_DEPTH) {
      offset = at;
      refuse(`expected collections nested at most ${MAX_DOCUMENT_DEPTH} deep, got deeper`);
    }
    if (nodes > MAX_DOCUMENT_NODES) {
      offset = at;
      refuse(`expected a document of at most ${MAX_DOCUMENT_NODES} values, keys, indicators and separators, got more`);
    }
  }
}
