// The human executor page: shows one request from a presigned link and sends the executor's
// answers as MESS messages. It reads `GET <exchange>/mess/{ref}` and posts `POST <exchange>/mess`
// with the link's token as its bearer token (the reference design's page), where <exchange>
// is the link's `exchange=` (http or https only) or this server. Every value from the thread
// is rendered as text (textContent, never innerHTML); the token lives only in this closure and
// this tab's storage, and loading the page changes nothing.
'use strict';
(function () {
  var params = new URLSearchParams(location.search);
  var app = document.getElementById('app');

  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }
  function add(parent, child) { parent.appendChild(child); return child; }
  function isObj(v) { return v !== null && typeof v === 'object' && !Array.isArray(v); }
  function uriOf(v) { return isObj(v) ? v.uri : v; }
  function safeData(uri, kind) { return typeof uri === 'string' && uri.indexOf('data:' + kind + '/') === 0; }
  function fail(message) {
    app.textContent = '';
    add(app, el('h1', 'This link cannot be used'));
    add(app, el('p', message, 'error'));
  }

  // Times as a person reads them: relative ("2 min ago", "in 15 min"), the full local time
  // as the title and on a tap; `refreshTimes` keeps them true while the page stays open.
  function relative(iso) {
    var t = new Date(iso).getTime();
    if (isNaN(t)) return String(iso);
    var secs = Math.round((t - Date.now()) / 1000), past = secs <= 0, a = Math.abs(secs), n, unit;
    if (a < 45) return past ? 'just now' : 'in a moment';
    if (a < 45 * 60) { n = Math.max(1, Math.round(a / 60)); unit = 'min'; }
    else if (a < 36 * 3600) { n = Math.round(a / 3600); unit = 'h'; }
    else { n = Math.round(a / 86400); unit = n === 1 ? 'day' : 'days'; }
    return past ? n + ' ' + unit + ' ago' : 'in ' + n + ' ' + unit;
  }
  function fullTime(iso) {
    var d = new Date(iso);
    return isNaN(d.getTime()) ? String(iso)
      : d.toLocaleString(undefined, { weekday: 'short', day: 'numeric', month: 'short', year: 'numeric', hour: '2-digit', minute: '2-digit' });
  }
  function timeNode(iso) {
    var t = el('time', relative(iso), 'rel');
    t.dateTime = String(iso);
    t.title = fullTime(iso);
    t.tabIndex = 0;
    t.addEventListener('click', function () { t.classList.toggle('full'); paintTime(t); });
    return t;
  }
  function paintTime(t) { t.textContent = t.classList.contains('full') ? t.title : relative(t.dateTime); }
  function refreshTimes() { [].forEach.call(document.querySelectorAll('time.rel'), paintTime); }
  setInterval(refreshTimes, 30000);
  // A phone coming back to the tab (timers sleep in the background) sees true times at once.
  document.addEventListener('visibilitychange', function () { if (!document.hidden) refreshTimes(); });

  // ISO 8601 durations (PT20M, PT1H30M, P1D) as words; anything else as it came.
  function durationText(text) {
    var m = /^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$/.exec(String(text));
    if (!m || String(text) === 'P' || /T$/.test(String(text))) return String(text);
    var bits = [];
    if (m[1]) bits.push(m[1] + (m[1] === '1' ? ' day' : ' days'));
    if (m[2]) bits.push(m[2] + ' h');
    if (m[3]) bits.push(m[3] + ' min');
    if (m[4]) bits.push(m[4] + ' s');
    return bits.join(' ') || String(text);
  }

  // Any payload value as sentences: `key: value` lines, lists as lists, yes/no for booleans;
  // never raw JSON.
  function valueNode(v) {
    if (v === null || v === undefined) return el('span', 'none');
    if (typeof v === 'boolean') return el('span', v ? 'yes' : 'no');
    if (typeof v !== 'object') return el('span', String(v));
    if (Array.isArray(v)) {
      var ul = el('ul', null, 'list');
      v.forEach(function (item) { add(add(ul, el('li')), valueNode(item)); });
      return ul;
    }
    return fieldsNode(v);
  }
  function fieldsNode(obj) {
    var box = el('div', null, 'fields');
    Object.keys(obj).forEach(function (k) {
      var line = add(box, el('div', null, 'field'));
      add(line, el('span', k.replace(/_/g, ' ') + ': ', 'key'));
      add(line, valueNode(obj[k]));
    });
    return box;
  }

  // Preferences (the reference design's list), kept on this device; anything unknown falls back.
  var CHOICES = {
    defaultCamera: ['rear', 'front'],
    imageQuality: [1, 0.9, 0.8, 0.6, 0.4],
    audioFormat: ['webm', 'ogg', 'mp4'],
    theme: ['auto', 'light', 'dark']
  };
  var prefs = { defaultCamera: 'rear', imageQuality: 0.8, audioFormat: 'webm', theme: 'auto' };
  try {
    var saved = JSON.parse(localStorage.getItem('mess-prefs') || '{}');
    Object.keys(CHOICES).forEach(function (k) {
      if (isObj(saved) && CHOICES[k].indexOf(saved[k]) >= 0) prefs[k] = saved[k];
    });
  } catch (e) { /* storage disabled or garbled: the defaults */ }
  function savePrefs() {
    try { localStorage.setItem('mess-prefs', JSON.stringify(prefs)); } catch (e) { /* kept for this visit */ }
  }
  function applyTheme() {
    if (prefs.theme === 'auto') document.documentElement.removeAttribute('data-theme');
    else document.documentElement.setAttribute('data-theme', prefs.theme);
  }
  applyTheme();
  var AUDIO = { webm: 'audio/webm', ogg: 'audio/ogg', mp4: 'audio/mp4' };
  function audioSupported(format) {
    return !!(window.MediaRecorder && MediaRecorder.isTypeSupported && MediaRecorder.isTypeSupported(AUDIO[format]));
  }
  function captureMode() { return prefs.defaultCamera === 'front' ? 'user' : 'environment'; }

  // The exchange the link names, as its base URL: http or https only, no user or password.
  function exchangeBase(text) {
    if (!text) return '';
    var u;
    try { u = new URL(text); } catch (e) { return null; }
    if ((u.protocol !== 'https:' && u.protocol !== 'http:') || u.username || u.password) return null;
    return u.origin + u.pathname.replace(/\/+$/, '');
  }

  // The reference design's links name the thread `request=`; ours `ref=`.
  var ref = params.get('ref') || params.get('request') || '';
  var token = params.get('token') || '';
  var exchange = params.get('exchange') || '';
  var base = exchangeBase(exchange);
  // Kept for this tab only, so a reload still works, and only together with the exchange it
  // was given for: a link naming another exchange never receives a token it did not carry.
  try {
    var key = 'mess-token:' + ref;
    if (token && base !== null) sessionStorage.setItem(key, JSON.stringify({ token: token, exchange: exchange }));
    else {
      var kept = JSON.parse(sessionStorage.getItem(key) || 'null');
      if (isObj(kept) && kept.exchange === exchange && typeof kept.token === 'string') token = kept.token;
    }
  } catch (e) { /* storage disabled: the link must be opened again after a reload */ }
  // The token leaves the address bar (and with it copied links and the history).
  history.replaceState(null, '', location.pathname + '?ref=' + encodeURIComponent(ref) +
    (exchange ? '&exchange=' + encodeURIComponent(exchange) : ''));
  var thread = null;
  var recorder = null;

  function stopRecording() {
    if (recorder && recorder.state !== 'inactive') recorder.stop();
  }

  function call(method, path, body) {
    var headers = { 'Accept': 'application/json', 'Authorization': 'Bearer ' + token };
    if (body) headers['Content-Type'] = 'application/json';
    return fetch(base + path, {
      method: method, headers: headers, body: body, credentials: 'omit',
      referrerPolicy: 'no-referrer', cache: 'no-store'
    });
  }

  function hostOf(uri) { try { return new URL(uri).host; } catch (e) { return ''; } }
  function isHttps(uri) { try { return new URL(uri).protocol === 'https:'; } catch (e) { return false; } }

  // Media from other hosts: https only, and only when the executor taps (a request's author
  // learns nothing from a page that was merely opened); anything else stays text.
  function remoteMedia(box, kind, uri, name) {
    var label = kind + ': ' + (name ? name + ' ' : '');
    if (!isHttps(uri)) {
      box.textContent = label + String(uri) + ' (not loaded: only https addresses are)';
      return;
    }
    add(box, el('div', label + '(' + hostOf(uri) + ')', 'meta'));
    if (kind === 'file') {
      var a = add(box, el('a', 'Open ' + (name || uri)));
      a.href = uri; a.rel = 'noopener noreferrer'; a.target = '_blank'; a.referrerPolicy = 'no-referrer';
      return;
    }
    var b = button(box, 'Load ' + kind + ' from ' + hostOf(uri), function () {
      var m = kind === 'image' ? thumbnail(uri, name) : el(kind);
      if (kind !== 'image') { m.referrerPolicy = 'no-referrer'; m.controls = true; m.src = uri; }
      b.replaceWith(m);
    }, 'secondary load-remote');
  }

  // A photo as a thumbnail; a tap shows it full size over the page (a tap or Escape closes).
  function thumbnail(uri, name) {
    var img = el('img', null, 'thumb');
    img.src = uri; img.alt = name || 'photo'; img.referrerPolicy = 'no-referrer';
    img.tabIndex = 0; img.title = 'Show full size';
    function open() {
      var box = add(document.body, el('div', null, 'lightbox')); box.id = 'lightbox';
      box.setAttribute('role', 'dialog'); box.setAttribute('aria-label', img.alt);
      var big = add(box, el('img')); big.src = uri; big.alt = img.alt; big.referrerPolicy = 'no-referrer';
      if (name) add(box, el('p', name, 'caption'));
      function close() { box.remove(); document.removeEventListener('keydown', key); img.focus(); }
      function key(e) { if (e.key === 'Escape') close(); }
      box.addEventListener('click', close);
      document.addEventListener('keydown', key);
    }
    img.addEventListener('click', open);
    img.addEventListener('keydown', function (e) { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); open(); } });
    return img;
  }

  function coordinates(v) {
    var lat = Number(v.lat), lng = Number(v.lng);
    if (v.lat === undefined || v.lng === undefined || !isFinite(lat) || !isFinite(lng)) return null;
    // A link the executor may follow; the page itself fetches no map.
    var a = el('a', lat + ', ' + lng, 'coordinates');
    a.href = 'https://www.openstreetmap.org/?mlat=' + lat + '&mlon=' + lng + '#map=17/' + lat + '/' + lng;
    a.rel = 'noopener noreferrer'; a.target = '_blank'; a.referrerPolicy = 'no-referrer';
    return a;
  }

  // A place: the names a person reads first, then the coordinates as a map link.
  function locationNode(box, v, label) {
    if (!isObj(v)) { box.textContent = label + String(v); return box; }
    var parts = [];
    ['name', 'address', 'description'].forEach(function (k) { if (v[k]) parts.push(String(v[k])); });
    if (v.radius_km !== undefined) parts.push('within ' + v.radius_km + ' km');
    add(box, el('span', label + parts.join(' · ')));
    var map = coordinates(v);
    if (map) { add(box, document.createTextNode(parts.length ? ' · ' : '')); add(box, map); }
    return box;
  }

  // One context or content entry, as its kind says; media play from data URIs, or from https
  // after a tap; anything else as text.
  function entryNode(entry) {
    var box = el('div', null, 'entry');
    if (typeof entry === 'string') { box.textContent = entry; return box; }
    if (!isObj(entry)) { add(box, valueNode(entry)); return box; }
    var kind = Object.keys(entry)[0];
    var v = entry[kind];
    var uri = uriOf(v);
    var name = isObj(v) && v.name ? String(v.name) : '';
    if (kind === 'text') { box.textContent = String(v); }
    else if ((kind === 'image' || kind === 'file') && safeData(uri, 'image')) { add(box, thumbnail(uri, name)); box.className += ' photo'; }
    else if (kind === 'audio' && safeData(uri, 'audio')) { var au = add(box, el('audio')); au.controls = true; au.src = uri; }
    else if (kind === 'video' && safeData(uri, 'video')) {
      if (name) add(box, el('div', 'video: ' + name, 'meta'));
      var vi = add(box, el('video')); vi.controls = true; vi.src = uri;
    }
    else if (kind === 'image' || kind === 'audio' || kind === 'video' || kind === 'file') {
      if (typeof uri === 'string' && uri.indexOf('data:') === 0) box.textContent = kind + ': ' + (name ? name + ' ' : '') + '(attached)';
      else remoteMedia(box, kind, uri, name);
    }
    else if (kind === 'url') {
      if (typeof v === 'string' && /^https?:\/\//.test(v)) {
        var a = add(box, el('a', v)); a.href = v; a.rel = 'noopener noreferrer'; a.target = '_blank';
      } else { box.textContent = 'url: ' + String(v); }
    }
    else if (kind === 'location') { locationNode(box, v, 'location: '); box.className += ' location'; }
    else if (kind === 'ref') {
      // Another thread of this exchange: the server sends its summary along when this link's
      // executor may see it (thread.refs); otherwise it is only named, as a thread that does
      // not exist would be.
      box.className += ' ref';
      add(box, el('span', 'refers to request '));
      add(box, el('code', String(v)));
      var seen = thread && thread.refs && thread.refs[String(v)];
      if (isObj(seen)) {
        var open = button(box, 'Show it', function () {
          open.replaceWith(refSummary(seen));
        }, 'secondary show-ref');
      }
    }
    else if (kind === 'confirmation') {
      if (v === true) box.textContent = 'Confirmed done';
      else if (v === false) box.textContent = 'Not confirmed';
      else { add(box, el('span', 'confirmation: ')); add(box, valueNode(v)); }
    }
    else if (kind === 'structured' || kind === 'json') { add(box, valueNode(v)); }
    else { add(box, el('span', kind.replace(/_/g, ' ') + ': ', 'key')); add(box, valueNode(v)); }
    return box;
  }

  // The summary of a referenced thread: what was asked, where it stands, what came back.
  function refSummary(r) {
    var box = el('div', null, 'ref-summary');
    add(box, el('strong', r.intent || r.ref));
    var line = add(box, el('p', (BADGE[r.status] || String(r.status).replace(/_/g, ' ')) + (r.executor ? ' · ' + r.executor : '') + ' · ', 'meta'));
    if (r.updated) add(line, timeNode(r.updated));
    if (r.response) {
      var what = add(box, el('div', null, 'sent'));
      add(what, el('h3', 'What was sent'));
      [].concat(r.response).forEach(function (c) { add(what, entryNode(c)); });
    }
    return box;
  }

  function requestOf(t) {
    for (var i = 0; i < t.messages.length; i++) {
      var payloads = t.messages[i].MESS || [];
      for (var j = 0; j < payloads.length; j++) if (payloads[j].request) return payloads[j].request;
    }
    return {};
  }

  // What a `waiting_for` says, as a phrase ("another request to finish: a, b").
  function waitingText(w) {
    if (!isObj(w)) return String(w);
    var what = {
      dependency: 'another request to finish' + (w.ref ? ': ' + [].concat(w.ref).join(', ') : ''),
      condition: (w.condition || 'a condition') + (w.eta ? ', expected in ' + durationText(w.eta) : ''),
      resource: w.resource || 'something needed',
      access: 'access to ' + (w.location || 'a place'),
      schedule: w.available_at ? 'a set time (' + fullTime(w.available_at) + ')' : 'a set time'
    }[w.type];
    return (what || [w.type].concat(Object.keys(w).filter(function (k) { return k !== 'type'; })
      .map(function (k) { return k + ': ' + [].concat(w[k]).join(', '); })).join(', ')) + (w.note ? ' (' + w.note + ')' : '');
  }

  // The status badge in words; `data-code` keeps the protocol's word.
  var BADGE = {
    pending: 'New', claimed: 'Taken', in_progress: 'In progress', needs_input: 'Waiting for an answer',
    needs_confirmation: 'Waiting for a yes', waiting: 'Waiting', held: 'On hold', retrying: 'Trying again',
    completed: 'Done', partial: 'Done in part', failed: 'Could not be done', declined: 'Declined',
    expired: 'Expired', cancelled: 'Cancelled', superseded: 'Replaced', delegated: 'Passed on'
  };

  var SAID = {
    claimed: 'Took it', in_progress: 'Started', needs_input: 'Asked a question', needs_confirmation: 'Asked for confirmation',
    waiting: 'Waiting for', held: 'Put it on hold', completed: 'Done', partial: 'Done in part', failed: 'Could not do it',
    declined: 'Declined', expired: 'Expired', cancelled: 'Cancelled', superseded: 'Replaced by a newer request',
    delegated: 'Passed on', retrying: 'Trying again', pending: 'Open again'
  };

  // One payload as sentences in the history.
  function payloadNode(payload) {
    var kind = Object.keys(payload)[0];
    var body = payload[kind];
    var box = el('div', null, 'entry said');
    if (kind === 'status' && isObj(body)) {
      var line = SAID[body.code] || String(body.code).replace(/_/g, ' ');
      if (body.code === 'waiting' && body.waiting_for) line += ' ' + waitingText(body.waiting_for);
      else if (body.code === 'waiting') line = 'Waiting';
      if (body.estimate) line += ', expects to take ' + durationText(body.estimate);
      if (body.progress_pct !== undefined && body.code === 'in_progress' && Number(body.progress_pct) > 0) line = Number(body.progress_pct) + '% done';
      if (body.reason) line += ': ' + body.reason;
      if (body.action) line += ': ' + body.action;
      if (body.consequences) line += ' (' + body.consequences + ')';
      if (body.message) line += ' — ' + body.message;
      box.textContent = line;
      return box;
    }
    if (kind === 'reply' && isObj(body)) {
      if (body.message) add(box, el('div', body.message));
      if (isObj(body.answers)) add(box, fieldsNode(body.answers));
      else if (body.answers !== undefined) add(box, valueNode(body.answers));
      if (body.confirm === true) add(box, el('div', 'Confirmed', 'confirmed'));
      if (body.confirm === false) add(box, el('div', 'Not confirmed: do not go ahead', 'rejected'));
      var other = {};
      Object.keys(body).forEach(function (k) { if (['re', 'message', 'answers', 'confirm'].indexOf(k) < 0) other[k] = body[k]; });
      if (Object.keys(other).length) add(box, fieldsNode(other));
      if (!box.childNodes.length) box.textContent = 'Replied';
      return box;
    }
    if (kind === 'review' && isObj(body)) {
      var verdict = 'Reviewed the work';
      if (body.rating === 'accept') verdict = 'Accepted the work';
      else if (body.rating === 'reject') verdict = 'Rejected the work';
      else if (body.rating !== undefined) verdict = 'Rated the work ' + body.rating + ' of 5';
      add(box, el('div', verdict, 'review'));
      if (body.feedback) add(box, el('div', '“' + body.feedback + '”'));
      if (body.request_redo === true) add(box, el('div', 'Asked for it to be done again', 'rejected'));
      return box;
    }
    if (kind === 'request') { box.textContent = 'Sent the request'; return box; }
    if (kind === 'ack') { box.textContent = 'The exchange received it'; return box; }
    if (kind === 'response') { box.textContent = 'Sent the result'; return box; }
    add(box, el('span', kind.replace(/_/g, ' ') + ': ', 'key'));
    add(box, valueNode(body));
    return box;
  }

  // The answer kinds the request asks for: `[{kind, spec}]` from `response_hint`.
  function hintsOf(req) {
    return [].concat(req.response_hint || []).map(function (h) {
      if (typeof h === 'string') return { kind: h, spec: null };
      if (isObj(h)) { var k = Object.keys(h)[0]; return { kind: k, spec: h[k] }; }
      return { kind: String(h), spec: null };
    });
  }
  function hintText(kind) {
    var found = hintsOf(requestOf(thread)).filter(function (h) { return h.kind === kind && typeof h.spec === 'string'; });
    return found.length ? found[0].spec : '';
  }

  function render(t) {
    thread = t;
    var env = t.envelope;
    var req = requestOf(t);
    app.textContent = '';
    var badge = add(app, el('span', BADGE[env.status] || String(env.status).replace(/_/g, ' '), 'status'));
    badge.id = 'status';
    badge.dataset.code = env.status;
    add(app, el('h1', env.intent)).id = 'intent';
    var from = add(app, el('p', 'From ' + (t.messages[0] ? t.messages[0].from : 'an agent') + ' · ', 'meta'));
    from.id = 'from';
    if (t.messages[0]) add(from, timeNode(t.messages[0].received));
    if (env.priority && env.priority !== 'normal') add(from, document.createTextNode(' · ' + env.priority + ' priority'));
    if (env.needed_by && !ENDED[env.status]) {
      var by = add(app, el('p', 'Needed by ', 'meta due'));
      by.id = 'needed-by';
      add(by, timeNode(env.needed_by));
    }
    if (env.requires && env.requires.length) add(app, el('p', 'requires ' + env.requires.join(', '), 'meta')).id = 'requires';
    if (req.context && req.context.length) {
      var ctx = add(app, el('section')); ctx.id = 'context';
      add(ctx, el('h2', 'Context'));
      req.context.forEach(function (c) { add(ctx, entryNode(c)); });
    }
    if (req.constraints) {
      var con = add(app, el('section')); con.id = 'constraints';
      add(con, el('h2', 'Constraints'));
      var rest = {};
      Object.keys(req.constraints).forEach(function (k) {
        if (k === 'location') locationNode(add(con, el('div', null, 'entry location')), req.constraints.location, 'where: ');
        else rest[k] = req.constraints[k];
      });
      if (Object.keys(rest).length) add(con, fieldsNode(rest));
    }
    var hints = hintsOf(req);
    if (hints.length) add(app, el('p', 'wanted: ' + hints.map(function (h) {
      return h.kind + (h.spec === null ? '' : ' (' + (typeof h.spec === 'string' ? h.spec : isObj(h.spec) ? Object.keys(h.spec).join(', ') : [].concat(h.spec).join(', ')) + ')');
    }).join(', '), 'meta')).id = 'hint';
    var next = el('section', null, 'next'); next.id = 'next';
    from.after(next);
    if (env.needed_by && !ENDED[env.status]) next.before(document.getElementById('needed-by'));
    add(app, historyNode(t));
    var out = add(app, el('div')); out.id = 'result';
    actions(env, next);
    add(app, el('p', 'Request ' + env.ref, 'meta')).id = 'ref';
    preferences();
  }

  // The thread so far, as a detached section.
  function historyNode(t) {
    var so = el('section'); so.id = 'history';
    add(so, el('h2', 'So far'));
    t.messages.forEach(function (m) {
      var box = add(so, el('div', null, 'message'));
      var who = add(box, el('div', (m.from === (thread.link && thread.link.executor) ? 'You' : m.from) + ' · ', 'meta'));
      add(who, timeNode(m.received));
      (m.MESS || []).forEach(function (p) {
        add(box, payloadNode(p));
        var kind = Object.keys(p)[0];
        var body = p[kind];
        if (kind === 'response' && isObj(body) && body.content) body.content.forEach(function (c) { add(box, entryNode(c)); });
        if (kind === 'response' && isObj(body) && body.notes) add(box, el('div', 'notes: ' + body.notes, 'entry'));
        if (kind === 'status' && isObj(body) && body.questions) body.questions.forEach(function (q) {
          var opts = (q.options || []).map(function (o) { return isObj(o) ? (o.label || o.value || Object.keys(o).map(function (k) { return o[k]; }).join(' ')) : String(o); });
          add(box, el('div', '“' + q.question + '”' + (opts.length ? ' (' + opts.join(' / ') + ')' : ''), 'entry question'));
        });
      });
    });
    return so;
  }

  function form(title, id, parent) {
    var d = add(parent || app, el('details')); d.id = id;
    add(d, el('summary', title));
    return d;
  }
  function field(parent, label, type, id) {
    add(parent, el('label', label)).htmlFor = id;
    var input = add(parent, el(type === 'textarea' || type === 'select' ? type : 'input'));
    if (type !== 'textarea' && type !== 'select') input.type = type;
    input.id = id;
    return input;
  }
  function options(select, list) {
    list.forEach(function (o) {
      var opt = add(select, el('option', o[1]));
      opt.value = String(o[0]);
    });
    return select;
  }
  function button(parent, text, onClick, cls) {
    var b = add(parent, el('button', text, cls));
    b.type = 'button';
    b.addEventListener('click', onClick);
    return b;
  }
  function value(id) { var n = document.getElementById(id); return n ? n.value.trim() : ''; }

  function status(code, extra) {
    var s = { re: thread.envelope.ref, code: code };
    Object.keys(extra || {}).forEach(function (k) { if (extra[k] !== '' && extra[k] !== undefined) s[k] = extra[k]; });
    return { status: s };
  }

  function allows(action) {
    return !thread.link || (thread.link.actions || []).indexOf(action) >= 0;
  }

  // A `datetime-local` value as a timestamp with its offset (the exchange wants one).
  function timestamp(text) {
    var d = new Date(text);
    return isNaN(d.getTime()) ? text : d.toISOString().replace(/\.\d{3}Z$/, 'Z');
  }

  // The fields to ask for a confirmation (action, consequences, reversible) and the button.
  function confirmFields(parent, first) {
    field(parent, 'What you are about to do', 'text', 'confirm-action');
    field(parent, 'Consequences', 'text', 'confirm-consequences');
    var rev = field(parent, 'Reversible', 'checkbox', 'confirm-reversible');
    button(parent, 'Ask for confirmation', function () {
      if (!value('confirm-action')) { note('Say what you are about to do first.', true); return; }
      send([status('needs_confirmation', { action: value('confirm-action'), consequences: value('confirm-consequences'), reversible: rev.checked })]);
    }, first ? 'primary' : 'send').id = 'ask-confirm';
  }

  var WAITS = [
    ['dependency', 'Another request must finish first'],
    ['condition', 'A condition (daylight, weather, temperature)'],
    ['resource', 'Something I need (material, tool)'],
    ['access', 'Getting into a place'],
    ['schedule', 'Until a set time']
  ];

  // `waiting` with the reason the executor picks, shaped as MESS v1.0 section 4.3 says.
  function waitingForm(w) {
    var kind = options(field(w, 'Waiting for', 'select', 'wait-type'), WAITS);
    var groups = {};
    WAITS.forEach(function (pair) { groups[pair[0]] = add(w, el('div')); groups[pair[0]].dataset.type = pair[0]; });
    field(groups.dependency, 'Which requests (refs, comma separated)', 'text', 'wait-ref');
    field(groups.condition, 'Condition (e.g. daylight)', 'text', 'wait-condition');
    field(groups.condition, 'Expected in (e.g. 7h, optional)', 'text', 'wait-eta');
    field(groups.resource, 'What is missing', 'text', 'wait-resource');
    field(groups.resource, 'Note (optional)', 'text', 'wait-resource-note');
    field(groups.access, 'Where', 'text', 'wait-location');
    field(groups.access, 'Note (optional)', 'text', 'wait-access-note');
    field(groups.schedule, 'Available at', 'datetime-local', 'wait-available');
    function show() { Object.keys(groups).forEach(function (k) { groups[k].hidden = k !== kind.value; }); }
    kind.addEventListener('change', show);
    show();
    button(w, 'Waiting', function () {
      var t = kind.value;
      var need = { dependency: ['wait-ref', 'which requests'], condition: ['wait-condition', 'the condition'],
        resource: ['wait-resource', 'what is missing'], access: ['wait-location', 'where'], schedule: ['wait-available', 'the time'] }[t];
      if (!value(need[0])) { note('Say ' + need[1] + ' first.', true); return; }
      var f = { type: t };
      if (t === 'dependency') f.ref = value('wait-ref').split(',').map(function (s) { return s.trim(); }).filter(Boolean);
      if (t === 'condition') { f.condition = value('wait-condition'); if (value('wait-eta')) f.eta = isoDuration(value('wait-eta')); }
      if (t === 'resource') { f.resource = value('wait-resource'); if (value('wait-resource-note')) f.note = value('wait-resource-note'); }
      if (t === 'access') { f.location = value('wait-location'); if (value('wait-access-note')) f.note = value('wait-access-note'); }
      if (t === 'schedule') f.available_at = timestamp(value('wait-available'));
      send([status('waiting', { waiting_for: f })]);
    }, 'secondary').id = 'wait';
    field(w, 'Or pause it: why (optional)', 'text', 'hold-reason');
    button(w, 'Hold', function () { send([status('held', { reason: value('hold-reason') || 'on hold' })]); }, 'secondary').id = 'hold';
  }

  // The fields of a `structured:` (or `json:`) hint whose spec maps field names to types:
  // number/integer, boolean, date, datetime, a list of choices, or anything else as text
  // (a description becomes the placeholder). Returns a reader that yields the object, or
  // throws naming the field whose value is not of its type.
  function structuredForm(parent, hint, n) {
    var box = add(parent, el('fieldset', null, 'structured'));
    box.id = 'structured-' + n;
    add(box, el('legend', hint.kind === 'json' ? 'Data asked for' : 'Details asked for'));
    var inputs = Object.keys(hint.spec).map(function (name, i) {
      var spec = hint.spec[name];
      var word = typeof spec === 'string' ? spec.trim().toLowerCase() : '';
      var id = 'sf-' + n + '-' + i;
      var type = Array.isArray(spec) ? 'choice'
        : ['number', 'float', 'decimal'].indexOf(word) >= 0 ? 'number'
        : ['integer', 'int', 'count'].indexOf(word) >= 0 ? 'integer'
        : ['boolean', 'bool', 'yes/no'].indexOf(word) >= 0 ? 'boolean'
        : word === 'date' ? 'date'
        : ['datetime', 'timestamp', 'time'].indexOf(word) >= 0 ? 'datetime'
        : isObj(spec) ? 'data' : 'text';
      var input;
      if (type === 'choice') {
        input = options(field(box, name, 'select', id), [['', '—']].concat(spec.map(function (o) { var s = typeof o === 'string' ? o : JSON.stringify(o); return [s, s]; })));
      } else if (type === 'data') {
        input = field(box, name + ' (JSON)', 'textarea', id);
        input.placeholder = JSON.stringify(spec);
      } else {
        input = field(box, name, { number: 'number', integer: 'number', boolean: 'checkbox', date: 'date', datetime: 'datetime-local' }[type] || 'text', id);
        if (type === 'integer') input.step = '1';
        if (type === 'number') input.step = 'any';
        if (type === 'text' && typeof spec === 'string' && ['string', 'text'].indexOf(word) < 0) input.placeholder = spec;
      }
      input.dataset.field = name;
      return { name: name, type: type, input: input };
    });
    return function () {
      var out = {};
      inputs.forEach(function (f) {
        var raw = f.input.value.trim();
        if (f.type === 'boolean') { if (f.input.checked) out[f.name] = true; return; }
        if (raw === '') return;
        if (f.type === 'number' || f.type === 'integer') {
          var num = Number(raw);
          if (!isFinite(num) || (f.type === 'integer' && !Number.isInteger(num))) throw new Error(f.name + ' must be ' + (f.type === 'integer' ? 'a whole number' : 'a number'));
          out[f.name] = num;
        } else if (f.type === 'datetime') out[f.name] = timestamp(raw);
        else if (f.type === 'data') {
          try { out[f.name] = JSON.parse(raw); } catch (e) { throw new Error(f.name + ' must be JSON'); }
        } else out[f.name] = raw;
      });
      if (!Object.keys(out).length) return null;
      var entry = {}; entry[hint.kind] = out;
      return entry;
    };
  }

  // The estimate as buttons (5 min, 15 min, 1 h, or minutes and hours typed); `read` gives the
  // ISO 8601 duration the protocol wants, or undefined when none was picked.
  function estimatePicker(parent) {
    var box = add(parent, el('div', null, 'estimate'));
    box.id = 'estimate';
    add(box, el('p', 'How long will it take? (optional)', 'label'));
    var row = add(box, el('div', null, 'chips'));
    var custom = el('div', null, 'custom');
    custom.hidden = true;
    var chosen = null;
    var chips = [['PT5M', '5 min', '5m'], ['PT15M', '15 min', '15m'], ['PT1H', '1 h', '1h'], ['custom', 'Other…', 'custom']].map(function (c) {
      var b = button(row, c[1], function () {
        chosen = chosen === c[0] ? null : c[0];
        chips.forEach(function (o) { o.setAttribute('aria-pressed', String(o === b && chosen !== null)); });
        custom.hidden = chosen !== 'custom';
        if (chosen === 'custom') document.getElementById('estimate-hours').focus();
      }, 'chip');
      b.id = 'estimate-' + c[2];
      b.setAttribute('aria-pressed', 'false');
      return b;
    });
    add(box, custom);
    var h = field(add(custom, el('div')), 'Hours', 'number', 'estimate-hours');
    var m = field(add(custom, el('div')), 'Minutes', 'number', 'estimate-minutes');
    [h, m].forEach(function (i) { i.min = '0'; i.step = '1'; i.inputMode = 'numeric'; });
    return function () {
      if (chosen !== 'custom') return chosen || undefined;
      var hours = Math.max(0, Math.floor(Number(h.value) || 0)), mins = Math.max(0, Math.floor(Number(m.value) || 0));
      hours += Math.floor(mins / 60); mins %= 60;
      if (!hours && !mins) return undefined;
      return 'PT' + (hours ? hours + 'H' : '') + (mins ? mins + 'M' : '');
    };
  }

  function primary(parent, text, onClick) {
    return button(parent, text, onClick, 'primary');
  }

  // The last status message of the thread with this code, if any.
  function lastStatus(code) {
    var found = null;
    thread.messages.forEach(function (m) {
      (m.MESS || []).forEach(function (p) { if (isObj(p.status) && p.status.code === code) found = { body: p.status, at: m.received }; });
    });
    return found;
  }

  var ENDED = {
    completed: 'Done', partial: 'Done in part', failed: 'It could not be done', declined: 'Declined',
    expired: 'It expired before anyone finished it', cancelled: 'The requester cancelled it',
    superseded: 'A newer request replaced it', delegated: 'It was passed on'
  };

  // The one next step at each status, at the top of the page: a sentence and at most one
  // primary button; the other actions follow in the forms below.
  // A request asking for approval (or a confirm_by request's confirmation, `confirming`): who
  // decided what, and Approve / Deny while it is open.
  function approvalActions(env, next, me, confirming) {
    var a = confirming ? env.confirm_by : env.approval;
    var decided = [].concat(env.decisions || []);
    var yes = decided.filter(function (d) { return d.decision === 'approved'; }).length;
    var box = add(next, el('div', null, 'approval')); box.id = 'approval';
    add(box, el('p', yes + ' of ' + a.need + ' approval' + (a.need === 1 ? '' : 's') + ' needed' +
      (a.deny_vetoes ? '; one denial ends it' : '') + '.', 'meta')).id = 'approval-need';
    if (a.expires && !ENDED[env.status]) {
      var ex = add(box, el('p', 'Expires ', 'meta')); add(ex, timeNode(a.expires));
    }
    var list = add(box, el('ul', null, 'decisions')); list.id = 'decisions';
    decided.forEach(function (d) {
      var li = add(list, el('li', (d.by === me ? 'You' : d.by) + ' ' + d.decision + ' '));
      add(li, timeNode(d.at));
      if (d.channel) add(li, document.createTextNode(' via ' + d.channel));
      if (d.reason) add(li, document.createTextNode(': ' + d.reason));
    });
    var mine = decided.filter(function (d) { return d.by === me; })[0];
    if (confirming && env.confirmation !== 'requested') {
      var done = add(next, el('p', null, 'notice ended')); done.id = 'final';
      add(done, el('strong', env.confirmation === 'confirmed' ? 'Confirmed' : 'Not confirmed'));
      return;
    }
    if (!confirming && ENDED[env.status]) {
      var end = add(next, el('p', null, 'notice ended')); end.id = 'final';
      add(end, el('strong', env.status === 'completed' ? 'Approved' : env.status === 'declined' ? 'Not approved' : ENDED[env.status]));
      var last = lastStatus(env.status);
      if (last && last.body.message) add(end, document.createTextNode(': ' + last.body.message));
      return;
    }
    if (mine) {
      add(next, el('p', 'You ' + mine.decision + ' this; each approver decides once.', 'notice')).id = 'decided';
      return;
    }
    if (!allows('respond')) { add(next, el('p', 'This link lets you look, not decide.', 'notice')).id = 'read-only'; return; }
    next.id = 'decide';
    add(next, el('h2', confirming ? 'Do you confirm this step?' : 'Do you approve?'));
    var asked = confirming && lastStatus('needs_confirmation');
    if (asked && asked.body.action) {
      add(next, el('p', env.executor + ' will: ' + asked.body.action +
        (asked.body.consequences ? ' (' + asked.body.consequences + ')' : ''))).id = 'confirm-action';
    }
    var why = field(next, 'Why (optional when approving)', 'text', 'decision-reason');
    var decide = function (ok) {
      var reason = value('decision-reason');
      if (!ok && !reason) { why.focus(); note('Say why you deny it.', true); return; }
      var c = { confirmed: ok };
      if (reason) c.details = reason;
      send([{ response: { re: env.ref, content: [{ confirmation: c }] } }]);
    };
    primary(next, 'Approve', function () { decide(true); }).id = 'approve';
    button(next, 'Deny', function () { decide(false); }, 'danger').id = 'deny';
  }

  function actions(env, next) {
    var me = thread.link && thread.link.executor;
    if (env.approval) { approvalActions(env, next, me, false); return; }
    if (env.confirm_by && me && me !== env.executor) { approvalActions(env, next, me, true); return; }
    // Several answers: this executor's own slot is what it moves along.
    var slots = [].concat(env.slots || []);
    var many = (env.assignments || 1) > 1 || !!env.agree;
    var slot = many ? slots.filter(function (x) { return x.executor === me; })[0] : null;
    var s = slot ? slot.status : env.status;
    if (many) {
      var taken = slots.filter(function (x) { return ['declined', 'failed', 'cancelled', 'expired'].indexOf(x.status) < 0; }).length;
      add(next, el('p', (env.assignments || 1) + ' people answer this on their own; ' +
        Math.max(0, (env.assignments || 1) - taken) + ' place' + ((env.assignments || 1) - taken === 1 ? '' : 's') + ' open.', 'meta')).id = 'slots';
      if (!slot && env.status === 'claimed') {
        add(next, el('p', 'Every place is taken; nothing more to do here.', 'notice')).id = 'taken';
        return;
      }
    }
    if (me && env.executor && env.executor !== me) {
      add(next, el('p', 'Taken by ' + env.executor + '; nothing more to do here.', 'notice')).id = 'taken';
      return;
    }
    var mustConfirm = env.confirm_before === true && env.confirmation !== 'confirmed';
    if (s === 'pending' && thread.held_until) {
      // Held until its not_before: nobody may take it yet, so there is nothing to press.
      var held = add(next, el('p', 'Held until ', 'notice'));
      held.id = 'held';
      add(held, timeNode(thread.held_until));
      add(held, document.createTextNode('; it can be taken then.'));
      return;
    }
    if (s === 'pending') {
      if (!allows('claim')) { add(next, el('p', 'This link lets you look, not take it.', 'notice')).id = 'read-only'; return; }
      next.id = 'take';
      add(next, el('h2', 'Can you do this?'));
      if (mustConfirm) add(next, el('p', 'Before you act, this request needs the requester\'s confirmation: after taking it, you will describe what you are about to do and ask first.', 'notice')).id = 'confirm-note';
      var estimate = estimatePicker(next);
      primary(next, 'Take this', function () { send([status('claimed', { estimate: estimate() })]); }).id = 'claim';
      var no = form('Not for me: decline', 'decline-form');
      add(no, el('p', 'Declining ends this request for everyone it was offered to; if it is just not for you, leave it.', 'meta'));
      field(no, 'Why not?', 'text', 'decline-reason');
      button(no, 'Decline', function () {
        send([status('claimed'), status('declined', { reason: value('decline-reason') || 'declined' })]);
      }, 'danger').id = 'decline';
      return;
    }
    next.id = 'next';
    if (ENDED[s]) {
      var end = add(next, el('p', null, 'notice ended'));
      end.id = 'final';
      var last = lastStatus(s);
      add(end, el('strong', ENDED[s]));
      if (last) { add(end, document.createTextNode(' · ')); add(end, timeNode(last.at)); }
      if (last && last.body.reason) add(end, document.createTextNode(': ' + last.body.reason));
      // What was sent, first: the last response's content.
      var sent = null;
      thread.messages.forEach(function (m) {
        if (slot && m.from !== me) return;
        (m.MESS || []).forEach(function (p) { if (isObj(p.response)) sent = p.response; });
      });
      if (sent) {
        var what = add(next, el('div', null, 'sent')); what.id = 'sent';
        add(what, el('h2', 'What was sent'));
        [].concat(sent.content || []).forEach(function (c) { add(what, entryNode(c)); });
        if (sent.notes) add(what, el('div', 'notes: ' + sent.notes, 'entry'));
      }
      add(next, el('p', 'Nothing more to do here.', 'meta'));
      return;
    }
    if (s === 'claimed' && !mustConfirm) {
      var took = lastStatus('claimed');
      var line = add(next, el('p', 'You took this '));
      if (took) add(line, timeNode(took.at));
      if (took && took.body.estimate) add(line, document.createTextNode(', expecting ' + durationText(took.body.estimate)));
      add(line, document.createTextNode('. Tap Start when you begin.'));
      primary(next, 'Start', function () { send([status('in_progress')]); }).id = 'start';
    } else if (s === 'needs_input' || s === 'needs_confirmation') {
      var asked = lastStatus(s);
      var wait = add(next, el('p', null, 'notice waiting-for'));
      wait.id = 'waiting-for';
      var q = asked && asked.body.questions ? asked.body.questions.map(function (x) { return '“' + x.question + '”'; }).join(', ') : '';
      add(wait, el('strong', s === 'needs_input' ? 'Waiting for the requester to answer' + (q ? ' ' + q : '') : 'Waiting for the requester to confirm' + (asked && asked.body.action ? ': ' + asked.body.action : '')));
      add(wait, el('span', '. Their answer appears here when it arrives; you may still finish below.'));
    } else if (s === 'waiting' || s === 'held') {
      var paused = lastStatus(s);
      var why = add(next, el('p', null, 'notice waiting-for'));
      why.id = 'waiting-for';
      why.textContent = s === 'waiting' ? 'Waiting for ' + (paused && paused.body.waiting_for ? waitingText(paused.body.waiting_for) : 'something') + '.'
        : 'On hold' + (paused && paused.body.reason ? ': ' + paused.body.reason : '') + '.';
      primary(next, 'Resume', function () { send([status('in_progress')]); }).id = 'resume';
    } else if (s === 'in_progress' && !mustConfirm) {
      var since = lastStatus('in_progress');
      var doing = add(next, el('p', 'Working on it'));
      if (since) { add(doing, document.createTextNode(' since ')); add(doing, timeNode(since.at)); }
      add(doing, document.createTextNode('. When it is done, say what you found and send it.'));
      primary(next, 'Done: send the result', function () {
        var target = document.getElementById('complete');
        target.scrollIntoView({ behavior: 'smooth', block: 'start' });
        document.getElementById('answer-text').focus({ preventScroll: true });
      }).id = 'to-done';
    } else if (!mustConfirm) {
      add(next, el('p', 'Working on it.'));
    }
    // v1.1 confirm_before: asking comes first, and the exchange refuses work until a yes.
    if (mustConfirm) {
      var first = add(next, el('div')); first.id = 'confirm-first';
      add(first, el('h2', 'Ask for confirmation first'));
      if (env.confirmation === 'requested') {
        add(first, el('p', 'You asked; wait for the requester\'s answer before you act. It appears here when it arrives.', 'notice'));
      } else {
        add(first, el('p', env.confirmation === 'rejected'
          ? 'The requester said no: do not go ahead. You may ask again with a different plan.'
          : 'This request needs the requester\'s confirmation before you act: say what you are about to do and ask.', 'notice'));
        confirmFields(first, true);
      }
    }
    var p = form('Progress', 'progress-form');
    field(p, 'Percent done', 'number', 'progress');
    button(p, 'Report progress', function () { send([status('in_progress', { progress_pct: Number(value('progress') || 0) })]); }).id = 'send-progress';

    var q = form('Ask a question', 'question-form');
    field(q, 'Question', 'text', 'question');
    field(q, 'Options (comma separated, optional)', 'text', 'options');
    button(q, 'Ask', function () {
      var opts = value('options') ? value('options').split(',').map(function (o) { return o.trim(); }).filter(Boolean) : undefined;
      var question = { field: 'answer', question: value('question') };
      if (opts) question.options = opts;
      send([status('needs_input', { questions: [question] })]);
    }).id = 'ask';

    if (!mustConfirm) confirmFields(form('Ask to confirm', 'confirm-form'));

    waitingForm(form('Waiting or on hold', 'wait-form'));

    var done = add(app, el('section')); done.id = 'complete';
    add(done, el('h2', 'Your result'));
    if (mustConfirm) add(done, el('p', 'Completing works once the requester has confirmed.', 'meta'));
    var hints = hintsOf(requestOf(thread));
    field(done, hintText('text') ? 'Answer: ' + hintText('text') : 'Answer', 'textarea', 'answer-text');
    var readers = hints.filter(function (h) { return (h.kind === 'structured' || h.kind === 'json') && isObj(h.spec); })
      .map(function (h, n) { return structuredForm(done, h, n); });
    var camera = field(done, hintText('image') ? 'Take a photo: ' + hintText('image') : 'Take a photo', 'file', 'camera');
    camera.accept = 'image/*'; camera.setAttribute('capture', captureMode());
    var photos = field(done, 'Photos from the phone', 'file', 'photos');
    photos.accept = 'image/*'; photos.multiple = true;
    var video = field(done, hintText('video') ? 'Video: ' + hintText('video') : 'Video (record or pick)', 'file', 'video');
    video.accept = 'video/*'; video.setAttribute('capture', captureMode());
    var files = field(done, 'Files', 'file', 'files');
    files.multiple = true;
    var audio = null;
    if (window.MediaRecorder && navigator.mediaDevices) {
      var chunks = [];
      var rb = button(done, 'Record audio', function () {
        if (recorder) { recorder.stop(); return; }
        navigator.mediaDevices.getUserMedia({ audio: true }).then(function (stream) {
          var type = audioSupported(prefs.audioFormat) ? AUDIO[prefs.audioFormat] : '';
          chunks = []; var rec = new MediaRecorder(stream, type ? { mimeType: type } : undefined); recorder = rec;
          rec.ondataavailable = function (e) { chunks.push(e.data); };
          rec.onstop = function () {
            stream.getTracks().forEach(function (tr) { tr.stop(); });
            audio = new Blob(chunks, { type: (rec.mimeType || 'audio/webm').split(';')[0] }); recorder = null; rb.textContent = 'Record again';
          };
          rec.start(); rb.textContent = 'Stop recording';
        }).catch(function (e) { note('No microphone: ' + e.message, true); });
      }, 'secondary');
      rb.id = 'record';
    }
    var place = add(done, el('fieldset', null, 'place'));
    place.id = 'place';
    add(place, el('legend', hintText('location') ? 'Where: ' + hintText('location') : 'Where (optional)'));
    field(place, 'Place name', 'text', 'loc-name');
    field(place, 'Address', 'text', 'loc-address');
    field(place, 'Description', 'text', 'loc-description');
    var where = null;
    if (navigator.geolocation) {
      button(place, 'Add my coordinates', function () {
        navigator.geolocation.getCurrentPosition(function (pos) {
          where = { lat: pos.coords.latitude, lng: pos.coords.longitude, accuracy: pos.coords.accuracy };
          note('Coordinates added.');
        }, function (e) { note('No location: ' + e.message, true); });
      }, 'secondary').id = 'locate';
    }
    var ok = field(done, 'Confirm it is done', 'checkbox', 'confirmed');
    field(done, 'Notes (optional)', 'textarea', 'notes');
    button(done, 'Send the result', function () {
      var content = [];
      if (value('answer-text')) content.push(value('answer-text'));
      try {
        readers.forEach(function (read) { var entry = read(); if (entry) content.push(entry); });
      } catch (e) { note(e.message, true); return; }
      Promise.all([].map.call(camera.files, photo)
        .concat([].map.call(photos.files, photo))
        .concat([].map.call(video.files, function (f) { return media('video', f); }))
        .concat([].map.call(files.files, function (f) { return media('file', f); }))
        .concat(audio ? [media('audio', audio)] : [])).then(function (items) {
        content = content.concat(items);
        var loc = {};
        if (where) Object.keys(where).forEach(function (k) { loc[k] = where[k]; });
        [['name', 'loc-name'], ['address', 'loc-address'], ['description', 'loc-description']].forEach(function (f) {
          if (value(f[1])) loc[f[0]] = value(f[1]);
        });
        if (Object.keys(loc).length) content.push({ location: loc });
        if (ok.checked) content.push({ confirmation: true });
        if (!content.length) { note('Add an answer, a photo, a file or a confirmation first.', true); return; }
        var response = { re: thread.envelope.ref, content: content };
        if (value('notes')) response.notes = value('notes');
        send([status('completed'), { response: response }]);
      });
    }, 'send').id = 'complete-button';

    var f = form('Could not do it', 'fail-form');
    field(f, 'What went wrong', 'text', 'fail-reason');
    button(f, 'Report failure', function () { send([status('failed', { reason: value('fail-reason') || 'failed' })]); }, 'danger').id = 'fail';
  }

  // The reference design's preferences: camera, photo quality, audio format, theme; stored on this device.
  function preferences() {
    var d = form('Preferences', 'prefs-form');
    var cam = options(field(d, 'Camera', 'select', 'pref-camera'), [['rear', 'Rear'], ['front', 'Front']]);
    var qual = options(field(d, 'Photo quality', 'select', 'pref-quality'),
      [[1, 'Original'], [0.9, 'High (90%)'], [0.8, 'Good (80%)'], [0.6, 'Smaller (60%)'], [0.4, 'Smallest (40%)']]);
    var aud = options(field(d, 'Audio format', 'select', 'pref-audio'), [['webm', 'WebM'], ['ogg', 'Ogg'], ['mp4', 'MP4']]);
    [].forEach.call(aud.options, function (o) {
      if (window.MediaRecorder && !audioSupported(o.value)) { o.disabled = true; o.textContent += ' (not on this device)'; }
    });
    var theme = options(field(d, 'Theme', 'select', 'pref-theme'), [['auto', 'As the system'], ['light', 'Light'], ['dark', 'Dark']]);
    cam.value = prefs.defaultCamera; qual.value = String(prefs.imageQuality); aud.value = prefs.audioFormat; theme.value = prefs.theme;
    function changed() {
      prefs.defaultCamera = cam.value; prefs.imageQuality = Number(qual.value);
      prefs.audioFormat = aud.value; prefs.theme = theme.value;
      savePrefs(); applyTheme();
      [].forEach.call(document.querySelectorAll('#camera, #video'), function (i) { i.setAttribute('capture', captureMode()); });
    }
    [cam, qual, aud, theme].forEach(function (s) { s.addEventListener('change', changed); });
  }

  // "20m", "1h", "90 min" as ISO 8601 (PT20M); anything else is sent as typed.
  function isoDuration(text) {
    var m = /^(\d+)\s*(m|min|mins|minutes?|h|hr|hrs|hours?)$/i.exec(text);
    if (!m) return text;
    return 'PT' + m[1] + (m[2].charAt(0).toLowerCase() === 'h' ? 'H' : 'M');
  }

  function media(kind, blob, name) {
    return new Promise(function (resolve) {
      var r = new FileReader();
      r.onerror = function () { resolve({ text: 'could not read ' + (name || blob.name || kind) }); };
      r.onload = function () {
        var entry = {}; entry[kind] = { uri: r.result, mime: blob.type || 'application/octet-stream' };
        if (name || blob.name) entry[kind].name = name || blob.name;
        resolve(entry);
      };
      r.readAsDataURL(blob);
    });
  }

  // A JPEG photo re-encoded through a canvas at the chosen quality (which also drops its
  // metadata, such as where it was taken); other formats, and "Original", go as they are.
  function photo(file) {
    var q = prefs.imageQuality;
    if (q >= 1 || file.type !== 'image/jpeg' || !window.createImageBitmap) return media('image', file);
    return createImageBitmap(file).then(function (bitmap) {
      var c = document.createElement('canvas');
      c.width = bitmap.width; c.height = bitmap.height;
      c.getContext('2d').drawImage(bitmap, 0, 0);
      return new Promise(function (resolve) { c.toBlob(resolve, 'image/jpeg', q); });
    }).then(function (blob) {
      return blob ? media('image', blob, file.name) : media('image', file);
    }, function () { return media('image', file); });
  }

  function note(text, bad) {
    var out = document.getElementById('result');
    if (!out) return;
    // A toast at the bottom of the screen, so nothing scrolls away; it fades (errors later).
    out.textContent = '';
    add(out, el('p', text, bad ? 'error' : 'notice'));
    clearTimeout(note.timer);
    note.timer = setTimeout(function () { out.textContent = ''; }, bad ? 10000 : 4000);
  }

  function busy(on) {
    [].forEach.call(document.querySelectorAll('button'), function (b) { b.disabled = on; });
  }

  function send(payloads) {
    var body = JSON.stringify({ MESS: payloads });
    if (body.length > 15 * 1024 * 1024) {
      note('That is more than the exchange takes at once (16 MiB); send fewer or smaller files.', true);
      return Promise.resolve();
    }
    busy(true);
    return call('POST', '/mess', body).then(function (r) {
      return r.json().then(function (body) {
        if (!r.ok) { busy(false); note((body.error && body.error.message) || ('failed: HTTP ' + r.status), true); return; }
        return load().then(function () { note('Sent.'); });
      });
    }).catch(function (e) { busy(false); note('Could not send: ' + e.message, true); });
  }

  var thing = '/mess/' + encodeURIComponent(ref);

  function load() {
    return call('GET', thing).then(function (r) {
      return r.json().then(function (body) {
        if (!r.ok) {
          if (r.status === 404) {
            // The exchange says no more than that: once someone else takes a request, its
            // other links stop reading it.
            app.textContent = '';
            add(app, el('h1', 'Nothing more to do here'));
            add(app, el('p', 'This request is no longer open to you: someone else has taken it, or it was withdrawn.', 'notice')).id = 'taken';
            return;
          }
          fail(r.status === 401 ? 'The link has expired or is not valid. Ask for a new one.'
            : r.status === 403 && body.error && /another thread/.test(body.error.message) ? 'This link is for another request.'
            : (body.error && body.error.message) || ('HTTP ' + r.status));
          return;
        }
        render(body);
      });
    }).catch(function (e) { fail('The exchange cannot be reached: ' + e.message); });
  }

  // A change while the executor may be halfway through a form: the history and the status
  // badge are redrawn in place, the forms (typed text, chosen files, a recording) stay; only a
  // new status or confirmation state, which changes the actions, redraws the page.
  // The comparison is with the page as it is when the answer arrives, not when it was asked
  // for: a send redraws the page meanwhile, and an answer no newer than what is shown (an
  // event for the executor's own send) must not redraw it again and close an open form.
  function refresh() {
    return call('GET', thing).then(function (r) {
      if (!r.ok) return load();
      return r.json().then(function (t) {
        if (thread && t.messages.length < thread.messages.length) return;
        var shown = thread && thread.envelope.status + '/' + thread.envelope.confirmation;
        if (!thread || t.envelope.status + '/' + t.envelope.confirmation !== shown) { stopRecording(); render(t); return; }
        thread = t;
        var old = document.getElementById('history');
        if (old) old.replaceWith(historyNode(t));
      });
    }).catch(function () { /* the next event tries again */ });
  }

  if (base === null) { fail('The link names an exchange that is not an http or https address.'); return; }
  if (!ref || !token) { fail('The link is incomplete: it needs a ref and a token.'); return; }
  load().then(function () {
    if (!thread || !window.EventSource) return;
    // The agent's replies (and any change) arrive as they happen.
    var events = new EventSource(base + '/thread/' + encodeURIComponent(ref) + '/events?token=' + encodeURIComponent(token));
    events.addEventListener('thread', refresh);
    events.addEventListener('lagged', refresh);
    events.addEventListener('open', refresh);
  });
})();
