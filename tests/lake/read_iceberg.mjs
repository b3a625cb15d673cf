#!/usr/bin/env node
// tests/lake/read_iceberg.mjs — reads an Apache Iceberg table with a reader this project did not write:
// icebird (npm, Parquet via hyparquet), pinned in third_party/iceberg_reader/ and installed there by
// scripts/setup.sh. Tests use it to check that every SkipprLake table is readable by someone else.
//
//   node tests/lake/read_iceberg.mjs --catalog <catalog.db> <namespace> <table>
//   node tests/lake/read_iceberg.mjs <vN.metadata.json path or file:// URL>
//   READ_ICEBERG_S3_ENDPOINT=http://127.0.0.1:<port> node tests/lake/read_iceberg.mjs s3://bucket/key
//
// With READ_ICEBERG_S3_ENDPOINT, s3:// URLs (and the https://<bucket>.s3.amazonaws.com URLs icebird
// turns them into) are fetched path-style, unsigned, from that S3-compatible server instead.
//
// --catalog reads a SQLite file shaped like Iceberg's JDBC catalog (table iceberg_tables) with the
// sqlite3 CLI, read-only. Prints one JSON object, one row per line, rows in data-file order:
//   {"schema":[{"id","name","type","required"}...],   current schema's top-level fields, types as in
//    "rows":[{"<field name>": value...}...]}           the metadata JSON (nested types as JSON objects)
// A table without a current snapshot prints "rows":[]. On any failure: exit 1, one line on stderr
// naming the table or file.
//
// Values: long → number when safe, else decimal string; bytes (fixed, uuid) → hex, except top-level
// uuid → 8-4-4-4-12; top-level decimal(p,s) → string with s digits; top-level time → HH:MM:SS.ffffff;
// date → YYYY-MM-DD; timestamp/timestamptz → YYYY-MM-DDTHH:MM:SS.ffffffZ (microseconds kept: the
// default hyparquet parsers below are replaced, as its stock ones truncate to milliseconds); field
// missing from a data file → null. Structs, lists and maps (→ objects) are normalised recursively.
// Known reader limits: binary comes back UTF-8-decoded, decimals beyond ~15 digits lose precision.
//
// Module resolution: icebird is imported by absolute file URL computed from this file's own location
// (../../third_party/iceberg_reader/node_modules), so the current directory and NODE_PATH do not
// matter. icebird's package.json exports only an "import" condition, so createRequire() cannot
// resolve it; its entry point is read from that package.json instead.
import { readFileSync, existsSync, realpathSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { execFileSync } from 'node:child_process'

const readerDir = fileURLToPath(new URL('../../third_party/iceberg_reader/', import.meta.url))
const args = process.argv.slice(2)
let what = args[0] === '--catalog' ? `table ${args[2]}.${args[3]} in catalog ${args[1]}` : `table ${args[0] ?? '(none given)'}`

function fail(message) {
  process.stderr.write(`read_iceberg: ${what}: ${String(message).replace(/\s*\n\s*/g, ' ')}\n`)
  process.exit(1)
}

const toPath = loc => loc.startsWith('file:') ? fileURLToPath(loc) : loc

const s3Endpoint = process.env.READ_ICEBERG_S3_ENDPOINT?.replace(/\/+$/, '')
function s3Url(loc) {
  if (!s3Endpoint) return loc
  let match = /^s3a?:\/\/([^/]+)\/(.*)$/.exec(loc) ?? /^https:\/\/([^./]+)\.s3\.amazonaws\.com\/(.*)$/.exec(loc)
  return match ? `${s3Endpoint}/${match[1]}/${match[2]}` : loc
}

// Node's fetch has no file: support: serve file:// URLs and absolute paths from disk, anything else
// (e.g. an S3 URL icebird translated to https) with the fetch that was there before.
const previousFetch = globalThis.fetch
globalThis.fetch = async (url, init) => {
  const loc = s3Url(String(url))
  if (!loc.startsWith('file:') && !loc.startsWith('/')) {
    const response = await previousFetch(loc, init).catch(e => { throw new Error(`cannot fetch ${loc}: ${e.cause?.code ?? e.message}`) })
    if (!response.ok) throw new Error(`cannot fetch ${loc}: HTTP ${response.status}`)
    return response
  }
  try {
    return new Response(await readFile(toPath(loc)))
  } catch (e) {
    throw new Error(`cannot read ${loc}: ${e.code ?? e.message}`)
  }
}

async function loadReader() {
  const modules = join(realpathSync(readerDir), 'node_modules')
  const icebirdPackage = join(modules, 'icebird', 'package.json')
  if (!existsSync(icebirdPackage)) {
    throw new Error(`icebird is not installed in ${modules} (run scripts/setup.sh)`)
  }
  const entry = JSON.parse(readFileSync(icebirdPackage, 'utf8')).exports['.'].import
  const { icebergRead } = await import(pathToFileURL(join(modules, 'icebird', entry)))
  // The same module instance icebird's hyparquet uses (one hoisted copy, per the lock file).
  const { DEFAULT_PARSERS } = await import(pathToFileURL(join(modules, 'hyparquet', 'src', 'convert.js')))
  if (!DEFAULT_PARSERS?.timestampFromMicroseconds) throw new Error('hyparquet has no DEFAULT_PARSERS')
  const pad = (n, width = 2) => String(n).padStart(width, '0')
  const isoDate = days => new Date(Number(days) * 86400000).toISOString().slice(0, 10)
  const isoTimestamp = (ticks, perSecond, digits) => {
    const seconds = ticks / perSecond, fraction = ticks % perSecond
    const floor = fraction < 0n ? seconds - 1n : seconds
    const ms = Number(floor) * 1000
    return new Date(ms).toISOString().slice(0, 19) + '.' + pad(ticks - floor * perSecond, digits) + 'Z'
  }
  DEFAULT_PARSERS.dateFromDays = isoDate
  DEFAULT_PARSERS.timestampFromMicroseconds = micros => isoTimestamp(BigInt(micros), 1000000n, 6)
  DEFAULT_PARSERS.timestampFromNanoseconds = nanos => isoTimestamp(BigInt(nanos), 1000000000n, 9)
  return icebergRead
}

async function metadataLocation() {
  if (args[0] !== '--catalog') {
    if (args.length !== 1) throw new Error('usage: read_iceberg.mjs --catalog <catalog.db> <namespace> <table> | <metadata.json>')
    return args[0]
  }
  const [, db, namespace, table] = args
  if (args.length !== 4) throw new Error('usage: read_iceberg.mjs --catalog <catalog.db> <namespace> <table>')
  if (!existsSync(db)) throw new Error(`catalog file ${db} does not exist`)
  const quote = s => `'${s.replaceAll("'", "''")}'`
  let out
  try {
    out = execFileSync('sqlite3', ['-readonly', '-json', db,
      `SELECT catalog_name, metadata_location FROM iceberg_tables WHERE table_namespace = ${quote(namespace)}
       AND table_name = ${quote(table)} AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)`],
    { stdio: ['ignore', 'pipe', 'pipe'] }).toString()
  } catch (e) {
    throw new Error(e.code === 'ENOENT' ? 'sqlite3 CLI not found (scripts/setup.sh installs it)'
      : `sqlite3 failed: ${e.stderr?.toString().trim() || e.message}`)
  }
  const found = JSON.parse(out.trim() || '[]')
  if (found.length === 0) throw new Error('not found in iceberg_tables')
  if (found.length > 1) throw new Error(`ambiguous: in catalogs ${found.map(r => r.catalog_name).join(', ')}`)
  return found[0].metadata_location
}

const norm = v => v === undefined || v === null ? null
  : typeof v === 'bigint' ? (Number.isSafeInteger(Number(v)) ? Number(v) : String(v))
  : v instanceof Date ? v.toISOString()
  : v instanceof Uint8Array ? Buffer.from(v).toString('hex')
  : Array.isArray(v) ? v.map(norm)
  : typeof v === 'object' ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, norm(x)]))
  : v

// Top-level primitive types whose generic form above would be lossy or unreadable.
function normField(v, type) {
  if (v === undefined || v === null || typeof type !== 'string') return norm(v)
  const decimal = /^decimal\(\s*\d+\s*,\s*(\d+)\s*\)$/.exec(type)
  if (decimal && typeof v === 'number') {
    const scale = Number(decimal[1])
    return Math.abs(v) * 10 ** scale < 2 ** 53 ? v.toFixed(scale) : String(v)
  }
  if (type === 'uuid' && v instanceof Uint8Array && v.length === 16) {
    return Buffer.from(v).toString('hex').replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5')
  }
  if (type === 'time' && typeof v === 'bigint') {
    const pad = (n, width = 2) => String(n).padStart(width, '0')
    const seconds = v / 1000000n
    return `${pad(seconds / 3600n)}:${pad(seconds / 60n % 60n)}:${pad(seconds % 60n)}.${pad(v % 1000000n, 6)}`
  }
  return norm(v)
}

try {
  const location = await metadataLocation()
  what = args[0] === '--catalog' ? `${what} (${location})` : `table ${location}`
  const icebergRead = await loadReader()
  const metadata = location.startsWith('s3')
    ? await (await globalThis.fetch(location)).json()
    : JSON.parse(await readFile(toPath(location), 'utf8'))
  const schema = metadata.schemas?.find(s => s['schema-id'] === metadata['current-schema-id']) ?? metadata.schema
  if (!schema?.fields) throw new Error('metadata has no current schema')
  const snapshot = metadata['current-snapshot-id']
  const rows = snapshot === undefined || snapshot === null || snapshot === -1 ? []
    : await icebergRead({ tableUrl: metadata.location, metadata })
      .catch(e => { if (/No data manifest files/.test(e.message)) return []; throw e })
  const lines = rows.map(r => JSON.stringify(Object.fromEntries(schema.fields.map(f => [f.name, normField(r[f.name], f.type)]))))
  const fields = schema.fields.map(({ id, name, type, required }) => ({ id, name, type, required }))
  process.stdout.write(`{"schema":${JSON.stringify(fields)},\n"rows":[${lines.length ? '\n' + lines.join(',\n') + '\n' : ''}]}\n`)
} catch (e) {
  fail(e.message ?? e)
}
