/** Tiny DOM builders: text always goes in as text nodes, never as HTML, so nothing a user typed can become markup. */

type Child = Node | string | number | null | undefined | false;
type Attributes = Record<string, string | number | boolean | EventListener | undefined | null>;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes: Attributes = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (typeof value === "function") element.addEventListener(name.replace(/^on/, "").toLowerCase(), value);
    else if (value === true) element.setAttribute(name, "");
    else element.setAttribute(name, String(value));
  }
  append(element, ...children);
  return element;
}

export function append(parent: Node, ...children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
}

/** Replaces an element's content. */
export function replace(parent: Element, ...children: Child[]): void {
  parent.replaceChildren();
  append(parent, ...children);
}

let idCounter = 0;
/** A document-unique id for label/field/error associations. */
export function uid(prefix: string): string {
  idCounter += 1;
  return `${prefix}-${idCounter}`;
}

/** A timestamp as readable UTC text in a <time> element. */
export function time(date: Date | undefined, empty = "never"): Node {
  if (!date) return document.createTextNode(empty);
  const iso = date.toISOString();
  return h("time", { datetime: iso, title: iso }, `${iso.slice(0, 16).replace("T", " ")} UTC`);
}

/** A labelled input with a slot for its error, wired with aria-describedby / aria-invalid. */
export interface Field<E extends HTMLElement = HTMLInputElement> {
  wrapper: HTMLElement;
  control: E;
  setError(message: string | null): void;
}

export function field<E extends HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement>(
  label: string,
  control: E,
  options: { hint?: string; name: string },
): Field<E> {
  const id = control.id || uid(options.name);
  control.id = id;
  control.name = options.name;
  const errorId = `${id}-error`;
  const hintId = `${id}-hint`;
  const error = h("p", { class: "field-error", id: errorId, hidden: true });
  const hint = options.hint ? h("p", { class: "field-hint", id: hintId }, options.hint) : null;
  const describedBy = () => [hint ? hintId : "", error.hidden ? "" : errorId].filter(Boolean).join(" ");
  const sync = () => {
    const ids = describedBy();
    if (ids) control.setAttribute("aria-describedby", ids);
    else control.removeAttribute("aria-describedby");
  };
  sync();
  const isCheckbox = control instanceof HTMLInputElement && control.type === "checkbox";
  const wrapper = isCheckbox
    ? h("div", { class: "field field-checkbox" }, control, h("label", { for: id }, label), hint, error)
    : h("div", { class: "field" }, h("label", { for: id }, label), hint, control, error);
  return {
    wrapper,
    control,
    setError(message) {
      error.textContent = message ?? "";
      error.hidden = message === null;
      if (message === null) control.removeAttribute("aria-invalid");
      else control.setAttribute("aria-invalid", "true");
      sync();
    },
  };
}

export function input(attributes: Attributes = {}): HTMLInputElement {
  return h("input", { type: "text", ...attributes });
}

export function select(options: { value: string; label: string }[], selected?: string, attributes: Attributes = {}): HTMLSelectElement {
  const element = h("select", attributes);
  for (const option of options)
    element.appendChild(h("option", { value: option.value, selected: option.value === selected }, option.label));
  return element;
}

export function button(label: string, onClick: (event: Event) => void, attributes: Attributes = {}): HTMLButtonElement {
  return h("button", { type: "button", ...attributes, onclick: onClick as EventListener }, label);
}

/** A status region that screen readers announce. */
export function statusRegion(): { element: HTMLElement; show(message: string, kind?: "info" | "error" | "success"): void; clear(): void } {
  const element = h("div", { class: "status", role: "status", "aria-live": "polite" });
  return {
    element,
    show(message, kind = "info") {
      element.className = `status status-${kind}`;
      element.textContent = message;
    },
    clear() {
      element.className = "status";
      element.textContent = "";
    },
  };
}

/**
 * An action that asks first, in place (no modal dialog): the button turns into
 * "Confirm" and "Cancel" buttons next to a question.
 */
export function confirmButton(
  label: string,
  question: string,
  onConfirm: () => Promise<void> | void,
  attributes: Attributes = {},
): HTMLElement {
  const holder = h("span", { class: "confirm" });
  const initial = button(
    label,
    () => {
      const yes = button(
        "Confirm",
        async () => {
          yes.disabled = true;
          try {
            await onConfirm();
          } finally {
            yes.disabled = false;
          }
        },
        { class: "danger" },
      );
      const no = button("Cancel", () => {
        replace(holder, initial);
        initial.focus();
      });
      replace(holder, h("span", { class: "confirm-question" }, question), " ", yes, " ", no);
      yes.focus();
    },
    attributes,
  );
  holder.appendChild(initial);
  return holder;
}

/** A value shown once (a new key, a setup link) with a copy button. */
export function secretReveal(title: string, value: string, note: string, testId: string): HTMLElement {
  const code = h("code", { class: "reveal-value", "data-testid": testId }, value);
  const status = statusRegion();
  const copy = button("Copy", async () => {
    try {
      await navigator.clipboard.writeText(value);
      status.show("Copied to the clipboard.", "success");
    } catch {
      // No clipboard permission: select the text so the operator can copy it by hand.
      const range = document.createRange();
      range.selectNodeContents(code);
      const selection = getSelection();
      selection?.removeAllRanges();
      selection?.addRange(range);
      status.show("Select and copy the value by hand (the clipboard is not available).", "info");
    }
  });
  return h(
    "section",
    { class: "reveal", "aria-label": title },
    h("h2", {}, title),
    h("p", {}, note),
    h("div", { class: "reveal-row" }, code, copy),
    status.element,
  );
}

/** A table with a caption, header cells and rows; an empty state when there are no rows. */
export function table(caption: string, headers: string[], rows: Child[][], empty: string): HTMLElement {
  if (rows.length === 0) return h("p", { class: "empty" }, empty);
  return h(
    "div",
    { class: "table-scroll" },
    h(
      "table",
      {},
      h("caption", { class: "visually-hidden" }, caption),
      h("thead", {}, h("tr", {}, ...headers.map((text) => h("th", { scope: "col" }, text)))),
      h("tbody", {}, ...rows.map((cells) => h("tr", {}, ...cells.map((cell) => h("td", {}, cell))))),
    ),
  );
}

/** Previous / next page buttons over opaque page tokens. */
export function pager(state: { tokens: string[]; next: string }, load: (token: string) => void): HTMLElement | null {
  const hasPrevious = state.tokens.length > 1;
  if (!hasPrevious && state.next === "") return null;
  return h(
    "nav",
    { class: "pager", "aria-label": "Pagination" },
    button(
      "Previous page",
      () => {
        state.tokens.pop();
        load(state.tokens[state.tokens.length - 1] ?? "");
      },
      { disabled: !hasPrevious },
    ),
    " ",
    h("span", {}, `Page ${state.tokens.length}`),
    " ",
    button(
      "Next page",
      () => {
        state.tokens.push(state.next);
        load(state.next);
      },
      { disabled: state.next === "" },
    ),
  );
}
