// Precog's replay step: find the element by its candidate locators and perform the recorded
// event on it. Evaluated as `(function (cands, action, site) {...})(CANDS, ACTION, SITE)` with
// the locators and the action as JSON (crate::locator::Locator, crate::action::Action), and the
// replayed site's host. Returns a JSON string:
//   {status: "done", used: i}         performed, found by candidate i
//   {status: "missing"}               no candidate matched any element
//   {status: "ambiguous", count: n}   candidates matched, but none exactly one element
//   {status: "off_domain", url}       a link to another site: not followed
//   {status: "post"}                  a form that would POST: not submitted
// A candidate counts only when it matches exactly one element (never a guess).
(function (cands, action, site) {
  const find = (c) => {
    try {
      switch (c.kind) {
        case 'id': { const e = document.getElementById(c.id); return e ? [e] : []; }
        case 'anchored': {
          let e = c.anchor === null ? document.body : document.getElementById(c.anchor);
          for (const i of c.path) { if (!e) return []; e = e.children[i]; }
          if (!e) return [];
          if (c.attr && e.getAttribute(c.attr[0]) !== c.attr[1]) return [];
          return [e];
        }
        case 'css': return Array.from(document.querySelectorAll(c.selector));
        case 'text': return Array.from(document.getElementsByTagName(c.tag)).filter(
          (e) => (e.innerText || e.value || '').replace(/\s+/g, ' ').trim() === c.text);
        case 'attr': return Array.from(document.getElementsByTagName(c.tag)).filter(
          (e) => e.getAttribute(c.name) === c.value);
      }
    } catch (e) { /* a selector this page cannot parse */ }
    return [];
  };
  let el = null, used = -1, most = 0;
  for (let i = 0; i < cands.length && !el; i++) {
    const found = find(cands[i]);
    most = Math.max(most, found.length);
    if (found.length === 1) { el = found[0]; used = i; }
  }
  if (!el) return JSON.stringify(most > 1 ? { status: 'ambiguous', count: most } : { status: 'missing' });
  const sameSite = (url) => {
    try {
      const h = new URL(url, location.href).hostname.toLowerCase();
      return h === site || h.endsWith('.' + site) || site.endsWith('.' + h);
    } catch (e) { return false; }
  };
  switch (action.event) {
    case 'click': {
      const link = el.closest('a[href]');
      if (link && /^https?:/i.test(link.href) && !sameSite(link.href)) return JSON.stringify({ status: 'off_domain', url: link.href });
      if (link && link.target && link.target !== '_self') link.removeAttribute('target');
      el.click();
      break;
    }
    case 'check':
      if (el.checked !== action.checked) el.click();
      break;
    case 'submit': {
      if (!(el instanceof HTMLFormElement)) return JSON.stringify({ status: 'missing' });
      if ((el.method || 'get').toLowerCase() !== 'get') return JSON.stringify({ status: 'post' });
      if (!sameSite(el.action || location.href)) return JSON.stringify({ status: 'off_domain', url: el.action });
      for (const [n, v] of action.fields) {
        const f = el.elements.namedItem(n);
        if (f && 'value' in f && f.type !== 'password' && f.type !== 'file') f.value = v;
      }
      if (el.requestSubmit) el.requestSubmit(); else el.submit();
      break;
    }
  }
  return JSON.stringify({ status: 'done', used });
})
