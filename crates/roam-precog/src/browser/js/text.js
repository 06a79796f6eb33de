// An element's text as the locators see it, shared by the recorder (recorder.js) and the
// replayer (replay.js), which must agree: its visible text, whitespace folded; of an
// <input>, only a button's label (its value). What was typed into a field (a password, a
// search) is never read.
window.__roamPrecogText = (el) => ((el.tagName === 'INPUT'
  ? (['button', 'submit', 'reset'].includes(el.type) ? el.value : '')
  : el.innerText) || '').replace(/\s+/g, ' ').trim();
