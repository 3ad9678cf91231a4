// llama chat: the server's web page. Plain JavaScript, no build step.
// Every URL is relative, so the page works under any prefix the server's
// handler is mounted at.
'use strict';

(function () {
  const KEY = {
    convs: 'llama-ui.conversations',
    current: 'llama-ui.current',
    settings: 'llama-ui.settings',
    apiKey: 'llama-ui.apiKey',
    theme: 'llama-ui.theme',
    model: 'llama-ui.model',
  };
  const NUMERIC = ['temperature', 'top_k', 'top_p', 'min_p', 'max_tokens', 'seed', 'repeat_penalty'];
  const INTEGER = new Set(['top_k', 'max_tokens', 'seed']);
  const MAX_TEXT_FILE = 1 << 20; // bytes of one attached text file
  const $ = (id) => document.getElementById(id);

  // ---------------------------------------------------------------- Markdown
  // A small Markdown renderer that is safe by construction: the source is
  // HTML-escaped first, and only the tags made here are ever produced.

  function escapeHTML(s) {
    return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
      .replace(/"/g, '&quot;').replace(/'/g, '&#39;');
  }

  // safeURL returns an escaped URL fit for href, or '' for schemes other
  // than http(s) and mailto (relative URLs and anchors pass).
  function safeURL(escaped) {
    const raw = escaped.replace(/&amp;/g, '&').replace(/&quot;/g, '"').replace(/&#39;/g, "'")
      .replace(/&lt;/g, '<').replace(/&gt;/g, '>').trim();
    const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(raw.replace(/[\u0000-\u0020]/g, ''));
    if (scheme && !/^(https?|mailto)$/i.test(scheme[1])) return '';
    return escapeHTML(raw);
  }

  // inline renders the inline syntax of an already escaped line.
  function inline(s) {
    // Code spans and links are set aside (as \u0000N\u0000) so that the
    // emphasis rules never reach inside them.
    const kept = [];
    const keep = (html) => {
      kept.push(html);
      return '\u0000' + (kept.length - 1) + '\u0000';
    };
    const link = (href, text) => keep('<a href="' + href + '" target="_blank" rel="noopener noreferrer">' + text + '</a>');
    s = s.replace(/(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/g, (m, ticks, code) => keep('<code>' + code.trim() + '</code>'));
    s = s.replace(/!?\[([^\]]*)\]\(((?:[^()\s]|\([^()\s]*\))+)(?:\s+&quot;[^)]*&quot;)?\)/g, (m, text, url) => {
      const href = safeURL(url);
      if (!href) return text;
      return link(href, emphasis(text) || href);
    });
    s = s.replace(/(^|[\s(])(https?:\/\/[^\s<]+[^\s<.,:;!?)'"&])/g, (m, pre, url) => pre + link(url, url));
    s = emphasis(s);
    for (let i = 0; i < 3 && s.includes('\u0000'); i++) s = s.replace(/\u0000(\d+)\u0000/g, (m, n) => kept[+n]);
    return s;
  }

  function emphasis(s) {
    return s.replace(/\*\*(?=\S)([\s\S]*?\S)\*\*/g, '<strong>$1</strong>')
      .replace(/(^|[^\w])__(?=\S)([\s\S]*?\S)__(?!\w)/g, '$1<strong>$2</strong>')
      .replace(/(^|[^*\w])\*(?=[^\s*])([^*]*?[^\s*])\*(?!\*)/g, '$1<em>$2</em>')
      .replace(/(^|[^\w])_(?=[^\s_])([^_]*?[^\s_])_(?!\w)/g, '$1<em>$2</em>')
      .replace(/~~(?=\S)([\s\S]*?\S)~~/g, '<del>$1</del>');
  }

  // renderMarkdown turns Markdown into HTML: headings, paragraphs, lists
  // (nested by indentation), block quotes, rules, fenced code blocks (an
  // unclosed fence runs to the end, as while streaming), and inline code,
  // bold, italic, strike-through and links.
  function renderMarkdown(src) {
    const lines = escapeHTML(String(src).replace(/\u0000/g, '').replace(/\r\n?/g, '\n')).split('\n');
    const out = [];
    let para = [];
    let lists = []; // stack of {type, indent}
    const flushPara = () => {
      if (para.length) out.push('<p>' + para.map(inline).join('<br>') + '</p>');
      para = [];
    };
    const closeLists = (indent) => {
      while (lists.length && (indent < 0 || lists[lists.length - 1].indent > indent)) {
        out.push('</li></' + lists.pop().type + '>');
      }
    };
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i];
      const fence = /^(\s*)(`{3,}|~{3,})\s*([\w+#.-]*)/.exec(line);
      if (fence) {
        flushPara(); closeLists(-1);
        const body = [];
        const close = new RegExp('^\\s*' + fence[2][0] + '{' + fence[2].length + ',}\\s*$');
        for (i++; i < lines.length && !close.test(lines[i]); i++) body.push(lines[i]);
        out.push(codeBlock(body.join('\n'), fence[3]));
        continue;
      }
      if (/^\s*$/.test(line)) { flushPara(); continue; }
      const h = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line);
      if (h) {
        flushPara(); closeLists(-1);
        out.push('<h' + h[1].length + '>' + inline(h[2]) + '</h' + h[1].length + '>');
        continue;
      }
      if (/^\s{0,3}([-*_])(\s*\1){2,}\s*$/.test(line)) { flushPara(); closeLists(-1); out.push('<hr>'); continue; }
      const item = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/.exec(line);
      if (item) {
        flushPara();
        const indent = item[1].replace(/\t/g, '    ').length;
        const type = /\d/.test(item[2]) ? 'ol' : 'ul';
        closeLists(indent);
        const top = lists[lists.length - 1];
        if (top && top.indent === indent && top.type === type) {
          out.push('</li><li>');
        } else {
          if (top && top.indent === indent) out.push('</li></' + lists.pop().type + '>');
          const start = type === 'ol' && parseInt(item[2], 10) !== 1 ? ' start="' + parseInt(item[2], 10) + '"' : '';
          out.push('<' + type + start + '><li>');
          lists.push({ type, indent });
        }
        out.push(inline(item[3]));
        continue;
      }
      const quote = /^\s{0,3}&gt;\s?(.*)$/.exec(line);
      if (quote) {
        flushPara(); closeLists(-1);
        const body = [quote[1]];
        while (i + 1 < lines.length && /^\s{0,3}&gt;/.test(lines[i + 1])) body.push(lines[++i].replace(/^\s{0,3}&gt;\s?/, ''));
        out.push('<blockquote>' + body.map(inline).join('<br>') + '</blockquote>');
        continue;
      }
      if (lists.length && /^\s+\S/.test(line)) { out.push(' ' + inline(line.trim())); continue; }
      closeLists(-1);
      para.push(line);
    }
    flushPara(); closeLists(-1);
    return out.join('');
  }

  function codeBlock(escapedCode, lang) {
    return '<div class="codeblock"><div class="code-head"><span>' + (lang || 'text') +
      '</span><button type="button" class="copy">Copy</button></div><pre><code' +
      (lang ? ' class="language-' + lang + '"' : '') + '>' + escapedCode + '</code></pre></div>';
  }

  // ------------------------------------------------------------ Storage
  function load(key, fallback) {
    try {
      const v = localStorage.getItem(key);
      return v == null ? fallback : JSON.parse(v);
    } catch (e) {
      return fallback;
    }
  }
  function store(key, value) {
    try {
      localStorage.setItem(key, JSON.stringify(value));
      return true;
    } catch (e) {
      showNotice('Could not save in this browser\'s storage: ' + e.message);
      return false;
    }
  }

  const state = {
    convs: load(KEY.convs, []),
    currentId: load(KEY.current, null),
    settings: load(KEY.settings, {}),
    serverSettings: {}, // the server's ui_settings (--ui-config)
    defaults: {}, // the server's default generation settings
    apiKey: load(KEY.apiKey, ''),
    models: [],
    model: load(KEY.model, ''),
    router: false,
    vision: false,
    busy: false,
    abort: null,
    pending: [], // attachments of the message being written
  };
  // Storage written by hand or by another version may hold anything.
  if (!Array.isArray(state.convs)) state.convs = [];
  state.convs = state.convs.filter((c) => c && typeof c === 'object' && Array.isArray(c.messages));
  if (!state.settings || typeof state.settings !== 'object' || Array.isArray(state.settings)) state.settings = {};

  const newId = () => Date.now().toString(36) + Math.random().toString(36).slice(2, 8);
  const current = () => state.convs.find((c) => c.id === state.currentId) || null;
  const saveConvs = () => store(KEY.convs, state.convs) && store(KEY.current, state.currentId);
  const setting = (name) => {
    const v = state.settings[name];
    if (v !== undefined && v !== '') return v;
    const s = state.serverSettings[name];
    return s === undefined ? '' : s;
  };

  // ------------------------------------------------------------ HTTP
  // api calls the server; on 401 it asks for an API key and tries again.
  async function api(path, init = {}) {
    for (;;) {
      const headers = Object.assign({}, init.headers || {});
      if (state.apiKey) headers.Authorization = 'Bearer ' + state.apiKey;
      const res = await fetch(path, Object.assign({}, init, { headers }));
      if (res.status !== 401) return res;
      const key = await askKey();
      if (key === null) return res;
    }
  }

  // askKey opens the API-key dialog (once, however many requests wait on
  // it) and resolves to the key typed, or null when cancelled.
  let keyPromise = null;
  function askKey() {
    if (keyPromise) return keyPromise;
    keyPromise = new Promise((resolve) => {
      const dlg = $('key-dlg');
      $('key-input').value = state.apiKey || '';
      dlg.onclose = () => {
        keyPromise = null;
        if (dlg.returnValue === 'save' && $('key-input').value.trim()) {
          state.apiKey = $('key-input').value.trim();
          store(KEY.apiKey, state.apiKey);
          resolve(state.apiKey);
        } else {
          resolve(null);
        }
      };
      dlg.returnValue = '';
      if (!dlg.open) dlg.showModal();
    });
    return keyPromise;
  }

  async function errorText(res) {
    try {
      const j = await res.json();
      if (j && j.error) return j.error.message || JSON.stringify(j.error);
      return JSON.stringify(j);
    } catch (e) {
      return res.status + ' ' + res.statusText;
    }
  }

  // ------------------------------------------------------------ Server info
  async function loadServer() {
    try {
      const res = await api('v1/models');
      if (res.ok) {
        const j = await res.json();
        state.models = (j.data || []).map((m) => m.id);
      }
    } catch (e) {
      showNotice('The server cannot be reached: ' + e.message);
    }
    try {
      const res = await api('props');
      if (res.ok) {
        const p = await res.json();
        state.router = p.role === 'router';
        applyProps(p);
      }
    } catch (e) { /* shown above */ }
    if (state.router) {
      if (!state.models.includes(state.model)) state.model = state.models[0] || '';
      await loadModelProps();
    }
    renderModels();
  }

  function applyProps(p) {
    if (p.ui_settings && typeof p.ui_settings === 'object') state.serverSettings = p.ui_settings;
    const g = p.default_generation_settings && p.default_generation_settings.params;
    if (g) {
      state.defaults = {
        temperature: g.temperature, top_k: g.top_k, top_p: g.top_p, min_p: g.min_p,
        max_tokens: g.n_predict, seed: g.seed, repeat_penalty: g.repeat_penalty,
      };
    }
    if (p.modalities) state.vision = !!p.modalities.vision;
    if (!state.router && p.model_alias) $('model-name').textContent = baseName(p.model_alias);
    if (!localStorage.getItem(KEY.theme) && state.serverSettings.theme) applyTheme(state.serverSettings.theme);
    $('image-btn').hidden = !state.vision;
  }

  async function loadModelProps() {
    state.vision = false;
    if (!state.model) return;
    try {
      const res = await api('props?model=' + encodeURIComponent(state.model));
      if (res.ok) applyProps(await res.json());
    } catch (e) { /* the model may load later */ }
    $('image-btn').hidden = !state.vision;
  }

  const baseName = (p) => String(p).split(/[\\/]/).pop();

  function renderModels() {
    const sel = $('model-select');
    $('model-label').hidden = !state.router;
    if (!state.router) return;
    sel.textContent = '';
    for (const m of state.models) {
      const o = document.createElement('option');
      o.value = m;
      o.textContent = m;
      sel.append(o);
    }
    sel.value = state.model;
  }

  // ------------------------------------------------------------ Rendering
  function renderList() {
    const ul = $('conv-list');
    ul.textContent = '';
    const sorted = state.convs.slice().sort((a, b) => b.updated - a.updated);
    for (const c of sorted) {
      const li = document.createElement('li');
      li.dataset.id = c.id;
      if (c.id === state.currentId) li.className = 'active';
      const open = document.createElement('button');
      open.type = 'button';
      open.className = 'conv-open';
      open.textContent = c.title || 'New chat';
      open.title = c.title || 'New chat';
      open.onclick = () => { if (!state.busy) selectConv(c.id); closeSide(); };
      li.append(open,
        iconButton('conv-act rename', 'Rename', '<path d="M4 20h4L19 9l-4-4L4 16z"/>', () => renameConv(c.id)),
        iconButton('conv-act export', 'Export as JSON', '<path d="M12 4v11M7 10l5 5 5-5M5 20h14"/>', () => exportConvs([c], c.title)),
        iconButton('conv-act delete', 'Delete', '<path d="M5 7h14M10 7V4h4v3M7 7l1 13h8l1-13"/>', () => deleteConv(c.id)));
      ul.append(li);
    }
  }

  function iconButton(cls, title, path, onclick) {
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'icon ' + cls;
    b.title = title;
    b.setAttribute('aria-label', title);
    b.innerHTML = '<svg viewBox="0 0 24 24" aria-hidden="true">' + path + '</svg>';
    b.onclick = (e) => { e.stopPropagation(); onclick(); };
    return b;
  }

  function renderConv() {
    const box = $('messages');
    for (const el of Array.from(box.querySelectorAll('.msg'))) el.remove();
    const c = current();
    $('conv-title').textContent = c ? c.title || 'New chat' : 'New chat';
    $('empty').hidden = !!(c && c.messages.length);
    if (c) for (const m of c.messages) box.append(messageElement(m));
    box.scrollTop = box.scrollHeight;
  }

  function messageElement(m) {
    const el = document.createElement('div');
    el.className = 'msg ' + m.role;
    el.dataset.id = m.id;
    const bubble = document.createElement('div');
    bubble.className = 'bubble';
    if (m.role === 'user') {
      if (m.attachments && m.attachments.length) {
        const chips = document.createElement('div');
        chips.className = 'chips';
        for (const a of m.attachments) chips.append(chip(a));
        el.append(chips);
      }
      bubble.textContent = m.content;
      el.append(bubble);
      return el;
    }
    el.append(bubble);
    updateAssistant(el, m);
    return el;
  }

  function chip(a, onremove) {
    const s = document.createElement('span');
    s.className = 'chip';
    if (a.kind === 'image') {
      const img = document.createElement('img');
      img.src = a.url;
      img.alt = a.name;
      s.append(img);
    }
    s.append(document.createTextNode(a.name));
    if (onremove) {
      const b = document.createElement('button');
      b.type = 'button';
      b.textContent = '\u00d7';
      b.title = 'Remove';
      b.onclick = onremove;
      s.append(b);
    }
    return s;
  }

  // updateAssistant renders an assistant message into its element: the
  // reasoning (collapsible), the Markdown content, tool calls, errors and
  // the timings.
  function updateAssistant(el, m) {
    const bubble = el.querySelector('.bubble');
    el.classList.toggle('done', !!m.done);
    let det = bubble.querySelector('details.reasoning');
    if (m.reasoning) {
      if (!det) {
        det = document.createElement('details');
        det.className = 'reasoning';
        det.innerHTML = '<summary></summary><div class="reasoning-body"></div>';
        det.open = !m.done;
        bubble.prepend(det);
      }
      det.querySelector('summary').textContent = m.done || m.content ? 'Reasoning' : 'Thinking\u2026';
      det.querySelector('.reasoning-body').textContent = m.reasoning;
    }
    let content = bubble.querySelector('.content');
    if (!content) {
      content = document.createElement('div');
      content.className = 'content md';
      bubble.append(content);
    }
    content.innerHTML = renderMarkdown(m.content || '');
    for (const old of bubble.querySelectorAll('details.tool-call, .error-text, .msg-foot')) old.remove();
    for (const tc of m.toolCalls || []) {
      const d = document.createElement('details');
      d.className = 'tool-call';
      const sum = document.createElement('summary');
      sum.textContent = 'Tool call: ' + (tc.name || '?');
      const pre = document.createElement('pre');
      const code = document.createElement('code');
      code.textContent = prettyJSON(tc.arguments);
      pre.append(code);
      d.append(sum, pre);
      bubble.append(d);
    }
    if (m.error) {
      const e = document.createElement('div');
      e.className = 'error-text';
      e.textContent = m.error;
      bubble.append(e);
    }
    const foot = document.createElement('div');
    foot.className = 'msg-foot';
    const stats = statsText(m);
    if (stats || m.stopped) {
      const s = document.createElement('span');
      s.className = 'stats';
      if (m.stopped) {
        const st = document.createElement('span');
        st.className = 'stopped';
        st.textContent = 'Stopped';
        s.append(st, document.createTextNode(stats ? ' \u00b7 ' : ''));
      }
      s.append(document.createTextNode(stats));
      foot.append(s);
    }
    if (m.done) {
      const acts = document.createElement('span');
      acts.className = 'msg-actions';
      for (const [cls, label] of [['copy-msg', 'Copy'], ['regen', 'Regenerate']]) {
        const b = document.createElement('button');
        b.type = 'button';
        b.className = 'link ' + cls;
        b.textContent = label;
        acts.append(b);
      }
      foot.append(acts);
    }
    if (foot.childNodes.length) bubble.append(foot);
  }

  // copyText copies text to the clipboard (with the older API where the
  // page is not a secure context) and says so on the button.
  function copyText(text, button) {
    const done = (ok) => {
      const label = button.textContent;
      button.textContent = ok ? 'Copied' : 'Copy failed';
      setTimeout(() => { button.textContent = label; }, 1200);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(() => done(true), () => done(false));
      return;
    }
    const ta = document.createElement('textarea');
    ta.value = text;
    ta.setAttribute('readonly', '');
    ta.className = 'sr';
    document.body.append(ta);
    ta.select();
    let ok = false;
    try { ok = document.execCommand('copy'); } catch (e) { ok = false; }
    ta.remove();
    done(ok);
  }

  // regenerate replaces the conversation's last reply with a new one.
  async function regenerate() {
    const conv = current();
    if (state.busy || !conv || !conv.messages.length) return;
    if (conv.messages[conv.messages.length - 1].role === 'assistant') conv.messages.pop();
    const m = { id: newId(), role: 'assistant', content: '', done: false };
    if (state.router) m.model = state.model;
    conv.messages.push(m);
    saveConvs();
    renderConv();
    await generate(conv, m);
  }

  function prettyJSON(s) {
    try { return JSON.stringify(JSON.parse(s), null, 2); } catch (e) { return String(s || ''); }
  }

  const fmt = (x, d) => (typeof x === 'number' && isFinite(x) ? x.toFixed(d) : '?');

  function statsText(m) {
    const t = m.timings;
    if (!t) return '';
    const parts = [];
    if (t.prompt_n !== undefined) {
      parts.push('Prompt: ' + t.prompt_n + ' tokens, ' + fmt(t.prompt_ms / 1000, 2) + ' s, ' + fmt(t.prompt_per_second, 1) + ' t/s');
    }
    if (t.predicted_n !== undefined) {
      parts.push('Generation: ' + t.predicted_n + ' tokens, ' + fmt(t.predicted_ms / 1000, 2) + ' s, ' + fmt(t.predicted_per_second, 1) + ' t/s');
    }
    if (m.finish === 'length') parts.push('Token limit reached');
    return parts.join(' \u00b7 ');
  }

  function showNotice(text) {
    const n = $('notice');
    n.textContent = text;
    n.className = 'notice error-text';
    n.hidden = !text;
  }

  // ------------------------------------------------------------ Conversations
  function selectConv(id) {
    state.currentId = id;
    store(KEY.current, id);
    renderList();
    renderConv();
  }

  function newConv() {
    if (state.busy) return;
    state.currentId = null;
    store(KEY.current, null);
    renderList();
    renderConv();
    $('input').focus();
  }

  function renameConv(id) {
    const c = state.convs.find((x) => x.id === id);
    if (!c) return;
    const dlg = $('rename-dlg');
    $('rename-input').value = c.title || '';
    dlg.returnValue = '';
    dlg.onclose = () => {
      const t = $('rename-input').value.trim();
      if (dlg.returnValue === 'save' && t) {
        c.title = t;
        saveConvs();
        renderList();
        if (c.id === state.currentId) $('conv-title').textContent = t;
      }
    };
    dlg.showModal();
  }

  function deleteConv(id) {
    if (state.busy && id === state.currentId) return;
    const c = state.convs.find((x) => x.id === id);
    if (!c || !confirm('Delete "' + (c.title || 'New chat') + '"?')) return;
    state.convs = state.convs.filter((x) => x.id !== id);
    if (state.currentId === id) state.currentId = null;
    saveConvs();
    renderList();
    renderConv();
  }

  function exportConvs(list, name) {
    const blob = new Blob([JSON.stringify(list, null, 2)], { type: 'application/json' });
    const a = document.createElement('a');
    a.href = URL.createObjectURL(blob);
    a.download = (name || 'conversations').replace(/[^\w.-]+/g, '_').slice(0, 60) + '.json';
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 1000);
  }

  async function importConvs(file) {
    try {
      let list = JSON.parse(await file.text());
      if (!Array.isArray(list)) list = [list];
      let n = 0;
      for (const c of list) {
        if (!c || !Array.isArray(c.messages)) continue;
        const conv = {
          id: newId(), title: String(c.title || 'Imported chat'), created: Date.now(), updated: Date.now(),
          messages: c.messages.filter((m) => m && (m.role === 'user' || m.role === 'assistant'))
            .map((m) => Object.assign({}, m, { id: newId(), content: String(m.content || ''), done: true })),
        };
        state.convs.push(conv);
        n++;
      }
      if (!n) throw new Error('no conversation in the file');
      saveConvs();
      renderList();
    } catch (e) {
      showNotice('Import failed: ' + e.message);
    }
  }

  // ------------------------------------------------------------ Chat
  function requestMessages(conv) {
    const msgs = [];
    const sys = setting('systemMessage');
    if (sys) msgs.push({ role: 'system', content: String(sys) });
    for (const m of conv.messages) {
      if (m.role === 'user') {
        let text = m.content;
        const images = [];
        for (const a of m.attachments || []) {
          if (a.kind === 'text') text += '\n\n--- ' + a.name + ' ---\n' + a.text;
          else if (a.kind === 'image') images.push({ type: 'image_url', image_url: { url: a.url } });
        }
        msgs.push({ role: 'user', content: images.length ? [{ type: 'text', text }].concat(images) : text });
      } else if (m.content || (m.toolCalls && m.toolCalls.length)) {
        msgs.push({ role: 'assistant', content: m.content || '' });
      }
    }
    return msgs;
  }

  function requestBody(conv) {
    const body = { messages: requestMessages(conv), stream: true };
    if (state.router && state.model) body.model = state.model;
    for (const k of NUMERIC) {
      const v = setting(k);
      if (v === '' || v === null || v === undefined) continue;
      const n = Number(v);
      if (isFinite(n)) body[k] = INTEGER.has(k) ? Math.trunc(n) : n;
    }
    const custom = setting('custom');
    if (custom) {
      const extra = typeof custom === 'string' ? JSON.parse(custom) : custom;
      Object.assign(body, extra);
    }
    return body;
  }

  function setBusy(b) {
    state.busy = b;
    document.body.dataset.busy = b ? '1' : '0';
    $('send-btn').hidden = b;
    $('stop-btn').hidden = !b;
    $('new-chat').disabled = b;
    $('model-select').disabled = b;
    if (!b) $('live-stats').textContent = '';
  }

  async function send() {
    if (state.busy) return;
    const input = $('input');
    const text = input.value.trim();
    if (!text && !state.pending.length) return;
    showNotice('');
    let conv = current();
    if (!conv) {
      conv = { id: newId(), title: '', created: Date.now(), updated: Date.now(), messages: [] };
      state.convs.push(conv);
      state.currentId = conv.id;
    }
    if (!conv.title) conv.title = (text || state.pending[0].name).replace(/\s+/g, ' ').slice(0, 60);
    conv.messages.push({ id: newId(), role: 'user', content: text, attachments: state.pending });
    state.pending = [];
    renderPending();
    input.value = '';
    autoGrow();
    const m = { id: newId(), role: 'assistant', content: '', done: false };
    if (state.router) m.model = state.model;
    conv.messages.push(m);
    conv.updated = Date.now();
    saveConvs();
    renderList();
    renderConv();
    await generate(conv, m);
  }

  // generate streams the assistant message m of conv from the server.
  async function generate(conv, m) {
    const el = $('messages').querySelector('.msg[data-id="' + m.id + '"]');
    const ctrl = new AbortController();
    state.abort = ctrl;
    setBusy(true);
    let first = 0;
    let chunks = 0;
    let lastSave = 0;
    let frame = 0;
    const paint = () => {
      frame = 0;
      updateAssistant(el, m);
      stickToBottom();
    };
    const schedule = () => { if (!frame) frame = requestAnimationFrame(paint); };
    const calls = [];
    try {
      let body;
      try {
        body = requestBody(conv);
      } catch (e) {
        throw new Error('Extra request JSON is not valid: ' + e.message);
      }
      const res = await api('v1/chat/completions', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
        signal: ctrl.signal,
      });
      if (!res.ok) throw new Error(await errorText(res));
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let nl;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl).replace(/\r$/, '');
          buf = buf.slice(nl + 1);
          if (!line.startsWith('data:')) continue;
          const data = line.slice(5).trim();
          if (data === '[DONE]') continue;
          let j;
          try { j = JSON.parse(data); } catch (e) { continue; }
          if (j.error) throw new Error(j.error.message || JSON.stringify(j.error));
          if (j.timings) m.timings = j.timings;
          const choice = j.choices && j.choices[0];
          if (choice && choice.finish_reason) m.finish = choice.finish_reason;
          const d = choice && choice.delta;
          if (!d) continue;
          if (d.reasoning_content) m.reasoning = (m.reasoning || '') + d.reasoning_content;
          if (d.content) m.content += d.content;
          for (const tc of d.tool_calls || []) {
            const i = tc.index || 0;
            calls[i] = calls[i] || { id: '', name: '', arguments: '' };
            if (tc.id) calls[i].id = tc.id;
            if (tc.function && tc.function.name) calls[i].name += tc.function.name;
            if (tc.function && tc.function.arguments) calls[i].arguments += tc.function.arguments;
            m.toolCalls = calls.filter(Boolean);
          }
          // Live speed, counted here (about a token a chunk); the server's
          // own timings come with the last chunk.
          if (chunks++ === 0) first = performance.now();
          const secs = (performance.now() - first) / 1000;
          $('live-stats').textContent = '~' + chunks + ' tokens' + (secs > 0.2 ? ', ' + ((chunks - 1) / secs).toFixed(1) + ' t/s' : '');
          schedule();
          if (performance.now() - lastSave > 1000) {
            lastSave = performance.now();
            saveConvs();
          }
        }
      }
    } catch (e) {
      if (ctrl.signal.aborted) m.stopped = true;
      else m.error = e.message || String(e);
    }
    if (frame) cancelAnimationFrame(frame);
    m.done = true;
    conv.updated = Date.now();
    state.abort = null;
    saveConvs();
    if (el.isConnected) updateAssistant(el, m);
    const det = el.querySelector('details.reasoning');
    if (det) det.open = false;
    setBusy(false);
    stickToBottom();
  }

  function stickToBottom() {
    const box = $('messages');
    if (box.scrollHeight - box.scrollTop - box.clientHeight < 160) box.scrollTop = box.scrollHeight;
  }

  function stop() {
    if (state.abort) state.abort.abort();
  }

  // ------------------------------------------------------------ Attachments
  function renderPending() {
    const box = $('attachments');
    box.textContent = '';
    state.pending.forEach((a, i) => box.append(chip(a, () => {
      state.pending.splice(i, 1);
      renderPending();
    })));
  }

  async function addFiles(files, images) {
    for (const f of files) {
      try {
        if (images) {
          if (!f.type.startsWith('image/')) throw new Error('not an image');
          const url = await new Promise((resolve, reject) => {
            const r = new FileReader();
            r.onload = () => resolve(r.result);
            r.onerror = () => reject(r.error);
            r.readAsDataURL(f);
          });
          state.pending.push({ kind: 'image', name: f.name, url });
        } else {
          if (f.size > MAX_TEXT_FILE) throw new Error('larger than 1 MiB');
          const text = await f.text();
          if (text.includes('\u0000')) throw new Error('not a text file');
          state.pending.push({ kind: 'text', name: f.name, text });
        }
      } catch (e) {
        showNotice(f.name + ': ' + e.message);
      }
    }
    renderPending();
  }

  // ------------------------------------------------------------ Settings
  function openSettings() {
    const form = $('settings-form');
    for (const el of form.elements) {
      if (!el.name) continue;
      const v = state.settings[el.name];
      el.value = v === undefined || v === null ? '' : typeof v === 'object' ? JSON.stringify(v) : v;
      const fallback = state.serverSettings[el.name] !== undefined ? state.serverSettings[el.name] : state.defaults[el.name];
      if (fallback !== undefined && fallback !== null && fallback !== '') {
        el.placeholder = typeof fallback === 'object' ? JSON.stringify(fallback) : String(fallback);
      }
    }
    $('settings-error').hidden = true;
    $('settings-dlg').returnValue = '';
    $('settings-dlg').showModal();
  }

  function saveSettings(e) {
    if (e.submitter && e.submitter.value !== 'save') return;
    const form = $('settings-form');
    const next = {};
    for (const el of form.elements) {
      if (!el.name) continue;
      const v = el.value.trim();
      if (v === '') continue;
      if (NUMERIC.includes(el.name)) {
        const n = Number(v);
        if (!isFinite(n)) continue;
        next[el.name] = n;
      } else {
        next[el.name] = el.value;
      }
    }
    if (next.custom) {
      try {
        const j = JSON.parse(next.custom);
        if (!j || typeof j !== 'object' || Array.isArray(j)) throw new Error('expected an object');
      } catch (err) {
        e.preventDefault();
        const p = $('settings-error');
        p.textContent = 'Extra request JSON: ' + err.message;
        p.hidden = false;
        return;
      }
    }
    state.settings = next;
    store(KEY.settings, next);
  }

  // ------------------------------------------------------------ Theme
  function applyTheme(t) {
    document.documentElement.dataset.theme = t === 'dark' ? 'dark' : 'light';
  }
  function initialTheme() {
    const saved = load(KEY.theme, '');
    if (saved) return saved;
    return window.matchMedia && matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light';
  }

  // ------------------------------------------------------------ Wiring
  function autoGrow() {
    const t = $('input');
    t.style.height = 'auto';
    t.style.height = Math.min(t.scrollHeight, window.innerHeight * 0.4) + 'px';
  }
  function closeSide() {
    $('app').classList.remove('side-open');
    $('scrim').hidden = true;
  }

  function init() {
    applyTheme(initialTheme());
    setBusy(false);
    $('composer').addEventListener('submit', (e) => { e.preventDefault(); send(); });
    $('input').addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); send(); }
    });
    $('input').addEventListener('input', autoGrow);
    $('stop-btn').onclick = stop;
    $('new-chat').onclick = () => { newConv(); closeSide(); };
    $('export-all').onclick = () => exportConvs(state.convs, 'conversations');
    $('import-btn').onclick = () => $('import-input').click();
    $('import-input').onchange = (e) => { if (e.target.files[0]) importConvs(e.target.files[0]); e.target.value = ''; };
    $('attach-btn').onclick = () => $('file-input').click();
    $('file-input').onchange = (e) => { addFiles(Array.from(e.target.files), false); e.target.value = ''; };
    $('image-btn').onclick = () => $('image-input').click();
    $('image-input').onchange = (e) => { addFiles(Array.from(e.target.files), true); e.target.value = ''; };
    $('settings-btn').onclick = openSettings;
    $('settings-form').addEventListener('submit', saveSettings);
    $('settings-reset').onclick = () => {
      for (const el of $('settings-form').elements) if (el.name) el.value = '';
    };
    $('theme-btn').onclick = () => {
      const t = document.documentElement.dataset.theme === 'dark' ? 'light' : 'dark';
      applyTheme(t);
      store(KEY.theme, t);
    };
    $('menu-btn').onclick = () => { $('app').classList.add('side-open'); $('scrim').hidden = false; };
    $('scrim').onclick = closeSide;
    $('model-select').onchange = (e) => {
      state.model = e.target.value;
      store(KEY.model, state.model);
      loadModelProps();
    };
    $('messages').addEventListener('click', (e) => {
      const b = e.target.closest('button');
      if (!b) return;
      if (b.matches('.codeblock .copy')) {
        copyText(b.closest('.codeblock').querySelector('code').textContent, b);
      } else if (b.matches('.copy-msg') || b.matches('.regen')) {
        const conv = current();
        const id = b.closest('.msg').dataset.id;
        const m = conv && conv.messages.find((x) => x.id === id);
        if (!m) return;
        if (b.matches('.copy-msg')) copyText(m.content, b);
        else if (conv.messages[conv.messages.length - 1] === m) regenerate();
      }
    });
    // A conversation left mid-stream (the page was closed) is finished.
    for (const c of state.convs) for (const m of c.messages || []) if (m.role === 'assistant' && !m.done) { m.done = true; m.stopped = true; }
    if (state.currentId && !current()) state.currentId = null;
    renderList();
    renderConv();
    loadServer();
    document.body.dataset.ready = '1';
  }

  window.llamaUI = { renderMarkdown };
  init();
})();
