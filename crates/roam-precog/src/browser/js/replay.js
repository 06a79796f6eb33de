// Precog's replay step: find the element by its candidate locators and perform the recorded
// event on it. Evaluated as `(function (cands, action, site, dry) {...})(CANDS, ACTION, SITE,
// DRY)` with the locators and the action as JSON (crate::locator::Locator,
// crate::action::Action), the replayed site's host, and whether to stop once the element is
// found (a dry run; `href` then says where it points, `x` and `y` where it is on the screen,
// scrolled into view). Returns a JSON string:
//   {status: "done", used: i, href}   performed (or found, when dry), by candidate i
//   {status: "missing"}               no candidate matched any element
//   {status: "ambiguous", count: n}   candidates matched, but none exactly one element
//   {status: "off_domain", url}       a link to another site: not followed
//   {status: "post"}                  a form that would POST: not submitted
// A candidate counts only when it matches exactly one element (never a guess). Which one
// wins (docs/precog.md, "Finding an element again"): the id; else a content candidate (the
// element's text or a stable attribute) that a positional one (the thesis's anchored path, the
// CSS path) agrees with; else the first content candidate alone (the layout moved, the element
// did not); else the first positional one (the content changed, the layout did not).
(function (cands, action, site, dry) {
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
          (e) => window.__roamPrecogText(e) === c.text); // js/text.js
        case 'attr': return Array.from(document.getElementsByTagName(c.tag)).filter(
          (e) => e.getAttribute(c.name) === c.value);
      }
    } catch (e) { /* a selector this page cannot parse */ }
    return [];
  };
  const found = cands.map(find);
  const most = Math.max(0, ...found.map((f) => f.length));
  const unique = (kinds) => found.map((f, i) => (f.length === 1 && kinds.includes(cands[i].kind) ? i : -1)).filter((i) => i >= 0);
  const ids = unique(['id']), content = unique(['text', 'attr']), positional = unique(['anchored', 'css']);
  const agreed = content.find((i) => positional.some((j) => found[j][0] === found[i][0]));
  const used = [ids[0], agreed, content[0], positional[0]].find((i) => i !== undefined);
  if (used === undefined) return JSON.stringify(most > 1 ? { status: 'ambiguous', count: most } : { status: 'missing' });
  const el = found[used][0];
  if (dry) {
    const link = el.closest('a[href]');
    el.scrollIntoView({ block: 'center' });
    const r = el.getBoundingClientRect();
    return JSON.stringify({ status: 'done', used, href: link ? link.pathname + link.search : '',
      x: r.x + r.width / 2, y: r.y + r.height / 2 });
  }
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
