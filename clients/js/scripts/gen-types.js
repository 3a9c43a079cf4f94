#!/usr/bin/env node
// Writes TypeScript declarations of the mailsink API's schemas and
// operations from its OpenAPI document:
//   node scripts/gen-types.js ../../httpapi/openapi.json types.d.ts
// With --check it writes nothing and fails when the file differs.
import { readFileSync, writeFileSync } from 'node:fs';

/** Returns the text of types.d.ts for an OpenAPI document. */
export function generate(doc) {
  const out = [
    '// Generated from the mailsink OpenAPI document by scripts/gen-types.js. Do not edit.',
    `// ${doc.info.title} ${doc.info.version}`,
    '',
  ];
  for (const [name, schema] of Object.entries(doc.components.schemas)) {
    if (schema.description) out.push(comment(schema.description, ''));
    out.push(`export type ${name} = ${type(schema, '')};`, '');
  }
  out.push('/** The query parameters of each operation that takes some. */');
  out.push('export interface OperationQueries {');
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      if (method === 'parameters') continue;
      const params = [...(item.parameters ?? []), ...(op.parameters ?? [])].filter((p) => p.in === 'query');
      if (params.length === 0) continue;
      out.push(`  /** ${method.toUpperCase()} ${path} */`);
      out.push(`  ${op.operationId}: {`);
      for (const p of params) {
        if (p.description) out.push(comment(p.description, '    '));
        out.push(`    ${p.name}${p.required ? '' : '?'}: ${type(p.schema, '    ')};`);
      }
      out.push('  };');
    }
  }
  out.push('}', '');
  return out.join('\n');
}

function comment(text, indent) {
  return `${indent}/** ${text.replaceAll('*/', '*\\/')} */`;
}

function type(s, indent) {
  if (s.$ref) return s.$ref.split('/').pop();
  if ('const' in s) return JSON.stringify(s.const);
  if (s.enum) return s.enum.map((v) => JSON.stringify(v)).join(' | ');
  if (s.oneOf) return s.oneOf.map((x) => type(x, indent)).join(' | ');
  if (s.anyOf) return s.anyOf.map((x) => type(x, indent)).join(' | ');
  if (s.allOf) return s.allOf.map((x) => type(x, indent)).join(' & ');
  const types = Array.isArray(s.type) ? s.type : [s.type];
  return types.map((t) => one(t, s, indent)).join(' | ');
}

function one(t, s, indent) {
  switch (t) {
    case 'string': return 'string';
    case 'integer': case 'number': return 'number';
    case 'boolean': return 'boolean';
    case 'null': return 'null';
    case 'array': return `Array<${type(s.items ?? {}, indent)}>`;
    case 'object': {
      const props = Object.entries(s.properties ?? {});
      if (props.length === 0) {
        return s.additionalProperties ? `Record<string, ${type(s.additionalProperties, indent)}>` : 'Record<string, unknown>';
      }
      const req = new Set(s.required ?? []);
      const inner = indent + '  ';
      const lines = ['{'];
      for (const [k, v] of props) {
        if (v.description) lines.push(comment(v.description, inner));
        lines.push(`${inner}${k}${req.has(k) ? '' : '?'}: ${type(v, inner)};`);
      }
      lines.push(`${indent}}`);
      return lines.join('\n');
    }
    default: return 'unknown';
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const args = process.argv.slice(2);
  const check = args[0] === '--check';
  const [src, dst] = check ? args.slice(1) : args;
  const text = generate(JSON.parse(readFileSync(src, 'utf8')));
  if (check) {
    if (readFileSync(dst, 'utf8') !== text) {
      console.error(`${dst} is not what ${src} gives: run npm run gen`);
      process.exit(1);
    }
  } else {
    writeFileSync(dst, text);
  }
}
