// Forms from a JSON schema (pydantic's): one input per field of an object, validated in the page.
// What the page cannot check (or a schema it does not know) the run checks: its refusal is shown too.

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
  return "json";
}

// One field: its input element and a read() that returns {value} or {error}.
function field(name, schema, root, required, initial) {
  const s = resolve(schema, root);
  const kind = kindOf(s);
  const label = s.title || name || "value";
  const id = `f-${Math.random().toString(36).slice(2)}`;
  const err = el("span", { class: "field-error", "data-error-for": name || "value" });
  let input;
  const start = initial !== undefined ? initial : s.default;
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
    if (start !== undefined) input.value = JSON.stringify(start, null, 2);
  } else if (kind === "const") {
    input = el("input", { id, name: name || "value", value: JSON.stringify(s.const), disabled: true });
  } else {
    const long = kind === "string" && (s.maxLength === undefined || s.maxLength > 200) && /text|comment|body|draft|feedback|note/i.test(name || "");
    input = long ? el("textarea", { id, name: name || "value" }) : el("input", { id, name: name || "value", type: kind === "string" ? "text" : "number", step: kind === "integer" ? "1" : "any" });
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
        try { value = JSON.parse(text); } catch (e) { return { error: `not JSON: ${e.message}` }; }
      } else if (kind === "string") {
        value = text;
        if (s.minLength !== undefined && value.length < s.minLength) return { error: `at least ${s.minLength} characters` };
        if (s.maxLength !== undefined && value.length > s.maxLength) return { error: `at most ${s.maxLength} characters` };
        if (s.pattern && !new RegExp(s.pattern, "u").test(value)) return { error: `must match ${s.pattern}` };
      } else {
        value = Number(text);
        if (!Number.isFinite(value)) return { error: "a number" };
        if (kind === "integer" && !Number.isInteger(value)) return { error: "a whole number" };
        if (s.minimum !== undefined && value < s.minimum) return { error: `at least ${s.minimum}` };
        if (s.maximum !== undefined && value > s.maximum) return { error: `at most ${s.maximum}` };
        if (s.exclusiveMinimum !== undefined && value <= s.exclusiveMinimum) return { error: `more than ${s.exclusiveMinimum}` };
        if (s.exclusiveMaximum !== undefined && value >= s.exclusiveMaximum) return { error: `less than ${s.exclusiveMaximum}` };
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
