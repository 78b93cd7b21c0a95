// Small DOM helpers shared by the dashboard's modules.

const SVG_NS = 'http://www.w3.org/2000/svg';

export const $ = (id) => document.getElementById(id);

// h builds an HTML element: h('td', {class: 'num'}, 'text', childNode).
export function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  node.append(...children.filter((c) => c !== null && c !== undefined));
  return node;
}

// s builds an SVG element.
export function s(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  setAttrs(node, attrs);
  node.append(...children.filter((c) => c !== null && c !== undefined));
  return node;
}

export function setAttrs(node, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== null && v !== undefined && v !== false) node.setAttribute(k, String(v));
  }
}

export function setText(id, text) {
  const node = $(id);
  if (node.textContent !== text) node.textContent = text;
}
