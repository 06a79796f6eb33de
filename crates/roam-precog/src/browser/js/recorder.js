// Precog's action recorder, run in every top-level document of a recorded tab (added with
// Page.addScriptToEvaluateOnNewDocument). It reports to the browser driver through the CDP
// binding `__roamPrecog`, one JSON message per call:
//   {type: "page", url}                       the document is ready
//   {type: "action", action: {locators, event, ...}}  a click, a checkbox change, a GET form
//   {type: "post"}                            a form submitted with POST: the path ends
// Locators are computed by `__roamPrecogLocators` (shared with the crawler of roam lab precog);
// their shapes are crate::locator::Locator's. Password and file fields are never read.
(function () {
  if (window !== window.top || window.__roamPrecogRecorder) return;
  window.__roamPrecogRecorder = true;
  const MAX = 256;
  const send = (m) => {
    try { window.__roamPrecog(JSON.stringify(m)); } catch (e) { /* binding gone: not recording */ }
  };
  const uniqueId = (id) => {
    if (!id || id.length > MAX) return false;
    try { return document.querySelectorAll('#' + CSS.escape(id)).length === 1; } catch (e) { return false; }
  };
  const distinguishing = (el) => {
    for (const n of ['class', 'name', 'type', 'role', 'aria-label', 'title', 'href']) {
      const v = el.getAttribute(n);
      if (v !== null && v.length <= MAX) return [n, v];
    }
    return null;
  };
  const anchored = (el) => {
    const path = [];
    let cur = el;
    while (cur.parentElement) {
      const parent = cur.parentElement;
      path.unshift(Array.prototype.indexOf.call(parent.children, cur));
      if (uniqueId(parent.id)) return { kind: 'anchored', anchor: parent.id, path, attr: distinguishing(el) };
      if (parent === document.body) return { kind: 'anchored', anchor: null, path, attr: distinguishing(el) };
      cur = parent;
    }
    return null;
  };
  const cssPath = (el) => {
    const parts = [];
    let cur = el;
    while (cur && cur !== document.body && cur.parentElement) {
      if (uniqueId(cur.id)) { parts.unshift('#' + CSS.escape(cur.id)); break; }
      const tag = cur.tagName.toLowerCase();
      let k = 1;
      for (let s = cur.previousElementSibling; s; s = s.previousElementSibling) if (s.tagName === cur.tagName) k++;
      parts.unshift(tag + ':nth-of-type(' + k + ')');
      cur = cur.parentElement;
    }
    if (cur === document.body) parts.unshift('body');
    const sel = parts.join(' > ');
    return sel.length <= MAX ? { kind: 'css', selector: sel } : null;
  };
  const text = (el) => {
    const t = window.__roamPrecogText(el); // js/text.js
    return t && t.length <= 80 ? { kind: 'text', tag: el.tagName.toLowerCase(), text: t } : null;
  };
  const attr = (el) => {
    for (const n of ['name', 'aria-label', 'title', 'href']) {
      const v = el.getAttribute(n);
      if (v && v.length <= MAX) return { kind: 'attr', tag: el.tagName.toLowerCase(), name: n, value: v };
    }
    return null;
  };
  window.__roamPrecogLocators = (el) => {
    const out = [];
    if (uniqueId(el.id)) out.push({ kind: 'id', id: el.id });
    for (const f of [anchored, cssPath, text, attr]) {
      const l = f(el);
      if (l) out.push(l);
    }
    return out;
  };
  const ACTIONABLE = 'a,button,input,select,textarea,label,summary,[role=button],[role=link],[role=tab],[onclick]';
  const isSubmitter = (el) => el.form && ((el.tagName === 'BUTTON' && (el.type || 'submit') === 'submit') ||
    (el.tagName === 'INPUT' && (el.type === 'submit' || el.type === 'image')));
  document.addEventListener('click', (e) => {
    if (!e.isTrusted || !(e.target instanceof Element)) return;
    const el = e.target.closest(ACTIONABLE) || e.target;
    // A checkbox reports its change; a submit button, its form's submission.
    if (el.tagName === 'INPUT' && (el.type === 'checkbox' || el.type === 'radio')) return;
    if (isSubmitter(el)) return;
    send({ type: 'action', action: { locators: window.__roamPrecogLocators(el), event: 'click' } });
  }, true);
  document.addEventListener('change', (e) => {
    const el = e.target;
    if (!e.isTrusted || !(el instanceof HTMLInputElement)) return;
    if (el.type !== 'checkbox' && el.type !== 'radio') return;
    send({ type: 'action', action: { locators: window.__roamPrecogLocators(el), event: 'check', checked: el.checked } });
  }, true);
  document.addEventListener('submit', (e) => {
    const form = e.target;
    if (!(form instanceof HTMLFormElement)) return;
    const method = ((e.submitter && e.submitter.getAttribute('formmethod')) || form.method || 'get').toLowerCase();
    // A form carrying a password is a sign-in, handled as a POST (the path ends, nothing is
    // recorded of it): sent with GET, the password would be in the next page's URL.
    const secret = Array.from(form.elements).some((f) => f.type === 'password' && f.value);
    if (method !== 'get' || secret) { send({ type: 'post' }); return; }
    // A submission the page's script made is not the user's action (a POST still ends the path).
    if (!e.isTrusted) return;
    const fields = [];
    for (const f of form.elements) {
      if (!f.name || f.disabled || f.type === 'password' || f.type === 'file') continue;
      if ((f.type === 'checkbox' || f.type === 'radio') && !f.checked) continue;
      if (fields.length < 32 && f.name.length <= MAX && String(f.value).length <= MAX) fields.push([f.name, String(f.value)]);
    }
    send({ type: 'action', action: { locators: window.__roamPrecogLocators(form), event: 'submit', fields } });
  }, true);
  const ready = () => send({ type: 'page', url: location.href });
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', ready); else ready();
})();
