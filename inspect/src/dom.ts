// A small way to build elements: every text goes in as a text node, never as HTML, so
// nothing the server returns (messages, memories, titles) can become markup.

type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | undefined | ((event: Event) => void)>;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: (Child | Child[])[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) {
      continue;
    }
    if (typeof value === "function") {
      element.addEventListener(name.replace(/^on/, ""), value);
    } else if (value === true) {
      element.setAttribute(name, "");
    } else {
      element.setAttribute(name, String(value));
    }
  }
  append(element, children);
  return element;
}

export function append(parent: Node, children: (Child | Child[])[]): void {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) {
      continue;
    }
    parent.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** A bar of `value` against `whole`, with the figures as its text for screen readers. */
export function bar(value: number, whole: number, label: string, kind = ""): HTMLElement {
  const share = whole > 0 ? Math.min(1, value / whole) : 0;
  const meter = h("span", { class: `bar ${kind}`, role: "img", "aria-label": label });
  // Set through the style object: the page's CSP allows no inline style attribute.
  const fill = h("span", { class: "fill" });
  fill.style.width = `${(share * 100).toFixed(2)}%`;
  meter.appendChild(fill);
  return meter;
}

export function when(seconds: bigint | undefined): string {
  if (seconds === undefined) {
    return "";
  }
  return new Date(Number(seconds) * 1000).toISOString().replace("T", " ").slice(0, 19);
}

export function tokens(n: number): string {
  return `${n.toLocaleString("en")} tok`;
}
