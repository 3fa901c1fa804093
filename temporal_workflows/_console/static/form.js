// Forms from a JSON schema (pydantic's): one input per field of an object, validated in the page.
// What the page cannot check (or a schema it does not know) the run checks: its refusal is shown too.
// Every answer leaves exactly as typed: integers past 2^53 and numbers as their digits (RawJSON), decimals
// as strings, JSON fields as their text; a pattern in Python's syntax is checked here only where JavaScript
// reads it the same way, otherwise by the run.

// A JSON value sent as its own text: digits JavaScript's numbers would round, JSON a person typed.
export class RawJSON {
  constructor(text) { this.text = text; }
}

// JSON.stringify, with RawJSON values written as their text.
export function stringify(value, indent) {
  const raws = [];
  const tag = Math.random().toString(36).slice(2);
  const text = JSON.stringify(value, (k, v) => (v instanceof RawJSON ? `\u0000${tag}:${raws.push(v.text) - 1}\u0000` : v), indent);
  if (!raws.length) return text;
  return text.replace(new RegExp(`"\\\\u0000${tag}:(\\d+)\\\\u0000"`, "g"), (_, i) => raws[Number(i)]);
}

// JSON.parse, keeping integers JavaScript cannot hold exactly as RawJSON (their digits, from the source).
export function parseJSON(text) {
  return JSON.parse(text, (k, v, context) =>
    typeof v === "number" && !Number.isSafeInteger(v) && context && /^-?\d+$/.test(context.source) ? new RawJSON(context.source) : v);
}

// A pattern in Python's regex syntax (pydantic's) as a JavaScript RegExp that means the same, or null when
// the two would read it differently (the run checks it then). Translated: (?P<n>...), (?P=n), \A, \Z and
// leading global flags (?i) (?s) (?m). Left to the run: \d \w \s \b (Unicode in Python, ASCII here), other
// inline flags, conditionals, comments, and whatever JavaScript would not compile.
export function jsPattern(pattern) {
  let p = String(pattern);
  let flags = "u";
  const lead = /^\(\?([a-zA-Z]+)\)/.exec(p);
  if (lead) {
    for (const f of lead[1]) { if ("ims".includes(f)) { if (!flags.includes(f)) flags += f; } else return null; }
    p = p.slice(lead[0].length);
  }
  let out = "";
  let inClass = false;
  for (let i = 0; i < p.length; i++) {
    const c = p[i];
    if (c === "\\") {
      const n = p[i + 1];
      if (n === undefined || "wWdDsSbB".includes(n) || /[0-9]/.test(n)) return null;
      if (n === "A" && !inClass) out += "^";
      else if (n === "Z" && !inClass) { if (flags.includes("m")) return null; out += "$"; }
      else out += c + n;
      i++;
      continue;
    }
    if (inClass) { if (c === "]") inClass = false; out += c; continue; }
    if (c === "[") {
      inClass = true;
      out += c;
      if (p[i + 1] === "^") { out += "^"; i++; }
      if (p[i + 1] === "]") { out += "\\]"; i++; }  // a "]" first in a class is a literal in Python
      continue;
    }
    if (c === "(" && p[i + 1] === "?") {
      if (p.startsWith("(?P<", i)) { out += "(?<"; i += 3; continue; }
      if (p.startsWith("(?P=", i)) {
        const end = p.indexOf(")", i);
        if (end < 0) return null;
        out += `\\k<${p.slice(i + 4, end)}>`;
        i = end;
        continue;
      }
      if (/^\(\?(?:[:=!]|<[=!])/.test(p.slice(i))) { out += c; continue; }
      return null;
    }
    if (c === "$" && !flags.includes("m")) { out += "$"; continue; }
    out += c;
  }
  try { return new RegExp(out, flags); } catch { return null; }
}

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function resolve(schema, root) {
  let s = schema || {};
  for (let i = 0; i < 10 && s.$ref; i++) {
    const path = s.$ref.replace(/^#\//, "").split("/");
    let target = root;
    for (const p of path) target = target ? target[p] : undefined;
    s = { ...(target || {}), ...Object.fromEntries(Object.entries(s).filter(([k]) => k !== "$ref")) };
  }
  if (s.allOf && s.allOf.length === 1) s = { ...resolve(s.allOf[0], root), ...s, allOf: undefined };
  if (s.anyOf) {
    const nonNull = s.anyOf.filter((x) => x.type !== "null");
    if (nonNull.length === 1) s = { ...resolve(nonNull[0], root), nullable: true, title: s.title, description: s.description, default: s.default };
  }
  return s;
}

function kindOf(s) {
  if (s.enum) return "enum";
  if (s.const !== undefined) return "const";
  if (["string", "integer", "number", "boolean"].includes(s.type)) return s.type;
  // pydantic's Decimal: a number or a string; sent as the string typed, so no digit is lost.
  const types = (s.anyOf || []).map((x) => x.type).filter((t) => t !== "null").sort().join(",");
  if (types === "number,string") return "decimal";
  return "json";
}

const JSON_NUMBER = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/;

function below(value, bound) {  // value (a BigInt or a number) < bound, exactly where both are whole
  return typeof value === "bigint" && Number.isInteger(bound) ? value < BigInt(bound) : Number(value) < bound;
}
function above(value, bound) {
  return typeof value === "bigint" && Number.isInteger(bound) ? value > BigInt(bound) : Number(value) > bound;
}

// One field: its input element and a read() that returns {value} or {error}.
function field(name, schema, root, required, initial) {
  const s = resolve(schema, root);
  const kind = kindOf(s);
  const label = s.title || name || "value";
  const id = `f-${Math.random().toString(36).slice(2)}`;
  const err = el("span", { class: "field-error", "data-error-for": name || "value" });
  const rx = kind === "string" && s.pattern ? jsPattern(s.pattern) : null;
  let input;
  let start = initial !== undefined ? initial : s.default;
  if (start instanceof RawJSON && kind !== "json") start = start.text;
  if (kind === "boolean") {
    input = el("input", { type: "checkbox", id, name: name || "value" });
    input.checked = Boolean(start);
  } else if (kind === "enum") {
    input = el("select", { id, name: name || "value" },
      required ? null : el("option", { value: "" }, "—"),
      s.enum.map((v) => el("option", { value: JSON.stringify(v) }, String(v))));
    if (start !== undefined) input.value = JSON.stringify(start);
  } else if (kind === "json") {
    input = el("textarea", { id, name: name || "value", placeholder: "JSON" });
    if (start !== undefined) input.value = stringify(start, 2);
  } else if (kind === "const") {
    input = el("input", { id, name: name || "value", value: JSON.stringify(s.const), disabled: true });
  } else {
    const long = kind === "string" && (s.maxLength === undefined || s.maxLength > 200) && /text|comment|body|draft|feedback|note/i.test(name || "");
    // Numbers in text inputs with a numeric keyboard: a number input would round what it holds to a double.
    const numeric = kind === "integer" || kind === "number" || kind === "decimal";
    const hint = { date: "YYYY-MM-DD", "date-time": "YYYY-MM-DDThh:mm:ss+hh:mm", time: "hh:mm:ss", duration: "e.g. PT1H30M" }[s.format];
    input = long ? el("textarea", { id, name: name || "value" }) : el("input", {
      id, name: name || "value", type: "text", inputmode: numeric ? (kind === "integer" ? "numeric" : "decimal") : undefined,
      placeholder: hint, "data-kind": kind,
    });
    if (start !== undefined && start !== null) input.value = String(start);
  }
  const wrap = kind === "boolean"
    ? el("label", { class: "check", for: id }, input, " ", label)
    : el("label", { for: id }, label + (required ? " *" : ""), input);
  const box = el("div", {}, wrap, s.description ? el("div", { class: "muted" }, s.description) : null, err);

  function read() {
    err.textContent = "";
    let value;
    if (kind === "boolean") value = input.checked;
    else if (kind === "const") value = s.const;
    else if (kind === "enum") {
      if (input.value === "") return required ? { error: "choose one" } : { skip: true };
      value = JSON.parse(input.value);
    } else {
      const text = input.value;
      if (text.trim() === "") {
        if (required) return { error: "required" };
        return { skip: true };
      }
      if (kind === "json") {
        try { JSON.parse(text); } catch (e) { return { error: `not JSON: ${e.message}` }; }
        value = new RawJSON(text.trim());  // sent as typed: JSON.parse would round big integers
      } else if (kind === "string") {
        value = text;
        const chars = [...value].length;  // code points, as Python counts them
        if (s.minLength !== undefined && chars < s.minLength) return { error: `at least ${s.minLength} characters` };
        if (s.maxLength !== undefined && chars > s.maxLength) return { error: `at most ${s.maxLength} characters` };
        if (rx && !rx.test(value)) return { error: `must match ${s.pattern}` };
      } else if (kind === "decimal") {
        value = text.trim();
        if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(value)) return { error: "a number, e.g. 12.50" };
      } else {
        const typed = text.trim();
        let n;
        if (kind === "integer") {
          if (!/^[+-]?\d+$/.test(typed)) return { error: "a whole number" };
          n = BigInt(typed);
          value = Number.isSafeInteger(Number(n)) ? Number(n) : new RawJSON(n.toString());
        } else {
          n = Number(typed);
          if (!Number.isFinite(n)) return { error: "a number" };
          value = JSON_NUMBER.test(typed) ? new RawJSON(typed) : n;  // its digits, as typed
        }
        if (s.minimum !== undefined && below(n, s.minimum)) return { error: `at least ${s.minimum}` };
        if (s.maximum !== undefined && above(n, s.maximum)) return { error: `at most ${s.maximum}` };
        if (s.exclusiveMinimum !== undefined && !above(n, s.exclusiveMinimum)) return { error: `more than ${s.exclusiveMinimum}` };
        if (s.exclusiveMaximum !== undefined && !below(n, s.exclusiveMaximum)) return { error: `less than ${s.exclusiveMaximum}` };
      }
    }
    return { value };
  }
  return { box, read, err, input };
}

// A form for values of `schema`: {node, read()} where read() returns {value} or {errors}.
export function schemaForm(schema, initial) {
  const root = schema || {};
  const s = resolve(root, root);
  const node = el("div", { class: "schema-form" });
  if (s.type === "object" && s.properties) {
    const required = new Set(s.required || []);
    const fields = Object.entries(s.properties).map(([name, prop]) => [name, field(name, prop, root, required.has(name), initial ? initial[name] : undefined)]);
    for (const [, f] of fields) node.append(f.box);
    return {
      node,
      read() {
        const value = {};
        let bad = false;
        for (const [name, f] of fields) {
          const r = f.read();
          if (r.error) { f.err.textContent = r.error; bad = true; } else if (!r.skip) value[name] = r.value;
        }
        return bad ? { errors: true } : { value };
      },
    };
  }
  const f = field("", s, root, true, initial);
  node.append(f.box);
  return {
    node,
    read() {
      const r = f.read();
      if (r.error) { f.err.textContent = r.error; return { errors: true }; }
      return { value: r.skip ? null : r.value };
    },
  };
}
