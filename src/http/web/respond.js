// The human executor page: shows one request from a presigned link and sends the executor's
// answers as MESS messages to /thread/{ref}?token=. Every value from the thread is rendered as
// text (textContent, never innerHTML); the token lives only in this closure, and loading the
// page changes nothing.
'use strict';
(function () {
  var params = new URLSearchParams(location.search);
  // The implementation plan's links name the thread `request=`; ours `ref=`.
  var ref = params.get('ref') || params.get('request') || '';
  var token = params.get('token') || '';
  // Kept for this tab only, so a reload still works; no script from the thread can run here
  // (the page's policy allows only this file).
  try {
    if (token) sessionStorage.setItem('mess-token:' + ref, token);
    else token = sessionStorage.getItem('mess-token:' + ref) || '';
  } catch (e) { /* storage disabled: the link must be opened again after a reload */ }
  // The token leaves the address bar (and with it copied links and the history).
  history.replaceState(null, '', location.pathname + '?ref=' + encodeURIComponent(ref));
  var api = '/thread/' + encodeURIComponent(ref);
  var withToken = '?token=' + encodeURIComponent(token);
  var app = document.getElementById('app');
  var thread = null;
  var recorder = null;

  function stopRecording() {
    if (recorder && recorder.state !== 'inactive') recorder.stop();
  }

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

  // One context or content entry, as its kind says; media only from data URIs (the page
  // loads nothing from other hosts), anything else as text.
  function entryNode(entry) {
    var box = el('div', null, 'entry');
    if (typeof entry === 'string') { box.textContent = entry; return box; }
    if (!isObj(entry)) { box.textContent = JSON.stringify(entry); return box; }
    var kind = Object.keys(entry)[0];
    var v = entry[kind];
    var uri = uriOf(v);
    var name = isObj(v) && v.name ? v.name : '';
    if (kind === 'text') { box.textContent = String(v); }
    else if (kind === 'image' && safeData(uri, 'image')) { var img = add(box, el('img')); img.src = uri; img.alt = name || 'image'; }
    else if (kind === 'audio' && safeData(uri, 'audio')) { var au = add(box, el('audio')); au.controls = true; au.src = uri; }
    else if (kind === 'video' && safeData(uri, 'video')) { var vi = add(box, el('video')); vi.controls = true; vi.src = uri; }
    else if (kind === 'image' || kind === 'audio' || kind === 'video' || kind === 'file') {
      box.textContent = kind + ': ' + (name ? name + ' ' : '') + (typeof uri === 'string' && uri.indexOf('data:') === 0 ? '(attached)' : String(uri));
    }
    else if (kind === 'url') {
      if (typeof v === 'string' && /^https?:\/\//.test(v)) {
        var a = add(box, el('a', v)); a.href = v; a.rel = 'noopener noreferrer'; a.target = '_blank';
      } else { box.textContent = 'url: ' + String(v); }
    }
    else if (kind === 'location' && isObj(v)) {
      var parts = [];
      if (v.name) parts.push(v.name);
      if (v.address) parts.push(v.address);
      if (v.lat !== undefined && v.lng !== undefined) parts.push(v.lat + ', ' + v.lng);
      if (v.description) parts.push(v.description);
      box.textContent = 'location: ' + parts.join(' · ');
    }
    else if (kind === 'ref') { box.textContent = 'see ' + String(v); }
    else if (kind === 'confirmation') { box.textContent = 'confirmation: ' + (isObj(v) ? JSON.stringify(v) : String(v)); }
    else { add(box, el('pre', kind + ': ' + JSON.stringify(v, null, 2))); }
    return box;
  }

  function requestOf(t) {
    for (var i = 0; i < t.messages.length; i++) {
      var payloads = t.messages[i].MESS || [];
      for (var j = 0; j < payloads.length; j++) if (payloads[j].request) return payloads[j].request;
    }
    return {};
  }

  function summary(payload) {
    var kind = Object.keys(payload)[0];
    var body = payload[kind];
    if (kind === 'status' && isObj(body)) return 'status: ' + body.code + (body.message ? ' — ' + body.message : '');
    if (kind === 'reply' && isObj(body)) {
      var bits = [];
      if (body.message) bits.push(body.message);
      if (body.answers) bits.push(JSON.stringify(body.answers));
      if (body.confirm !== undefined) bits.push('confirm: ' + body.confirm);
      return 'reply: ' + bits.join(' ');
    }
    if (kind === 'request') return 'request';
    if (kind === 'ack') return 'acknowledged';
    return kind;
  }

  function render(t) {
    thread = t;
    var env = t.envelope;
    var req = requestOf(t);
    app.textContent = '';
    add(app, el('span', env.status, 'status')).id = 'status';
    add(app, el('h1', env.intent)).id = 'intent';
    add(app, el('p', env.ref + ' · priority ' + (env.priority || 'normal') + (env.executor ? ' · taken by ' + env.executor : ''), 'meta'));
    if (env.needed_by) add(app, el('p', 'needed by ' + env.needed_by, 'meta')).id = 'needed-by';
    if (env.requires && env.requires.length) add(app, el('p', 'requires ' + env.requires.join(', '), 'meta')).id = 'requires';
    if (req.context && req.context.length) {
      var ctx = add(app, el('section')); ctx.id = 'context';
      add(ctx, el('h2', 'Context'));
      req.context.forEach(function (c) { add(ctx, entryNode(c)); });
    }
    if (req.constraints) {
      var con = add(app, el('section')); con.id = 'constraints';
      add(con, el('h2', 'Constraints'));
      add(con, el('pre', JSON.stringify(req.constraints, null, 2)));
    }
    if (req.response_hint) add(app, el('p', 'wanted: ' + [].concat(req.response_hint).map(function (h) {
      return typeof h === 'string' ? h : Object.keys(h).map(function (k) { return k + ' (' + h[k] + ')'; }).join(', ');
    }).join(', '), 'meta')).id = 'hint';
    add(app, historyNode(t));
    var out = add(app, el('div')); out.id = 'result';
    actions(env);
  }

  // The thread so far, as a detached section.
  function historyNode(t) {
    var so = el('section'); so.id = 'history';
    add(so, el('h2', 'So far'));
    t.messages.forEach(function (m) {
      var box = add(so, el('div', null, 'message'));
      add(box, el('div', m.from + ' · ' + m.received, 'meta'));
      (m.MESS || []).forEach(function (p) {
        add(box, el('div', summary(p), 'entry'));
        var kind = Object.keys(p)[0];
        var body = p[kind];
        if (kind === 'response' && isObj(body) && body.content) body.content.forEach(function (c) { add(box, entryNode(c)); });
        if (kind === 'status' && isObj(body) && body.questions) body.questions.forEach(function (q) {
          var opts = (q.options || []).map(function (o) { return typeof o === 'string' ? o : JSON.stringify(o); });
          add(box, el('div', '? ' + q.question + (opts.length ? ' (' + opts.join(' / ') + ')' : ''), 'entry'));
        });
      });
    });
    return so;
  }

  function form(title, id) {
    var d = add(app, el('details')); d.id = id;
    add(d, el('summary', title));
    return d;
  }
  function field(parent, label, type, id) {
    add(parent, el('label', label)).htmlFor = id;
    var input = add(parent, el(type === 'textarea' ? 'textarea' : 'input'));
    if (type !== 'textarea') input.type = type;
    input.id = id;
    return input;
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

  function actions(env) {
    var s = env.status;
    var me = thread.link && thread.link.executor;
    if (me && env.executor && env.executor !== me) {
      add(app, el('p', 'Taken by ' + env.executor + '; nothing more to do here.', 'notice')).id = 'taken';
      return;
    }
    if (s === 'pending') {
      if (!allows('claim')) { add(app, el('p', 'This link lets you look, not take it.', 'notice')).id = 'read-only'; return; }
      var take = add(app, el('section')); take.id = 'take';
      add(take, el('h2', 'Take it'));
      field(take, 'How long will it take? (e.g. PT20M, optional)', 'text', 'estimate');
      button(take, 'Claim', function () { send([status('claimed', { estimate: isoDuration(value('estimate')) })]); }).id = 'claim';
      var no = form('Decline', 'decline-form');
      add(no, el('p', 'Declining ends this request for everyone it was offered to; if it is just not for you, leave it.', 'meta'));
      field(no, 'Why not?', 'text', 'decline-reason');
      button(no, 'Decline', function () {
        send([status('claimed'), status('declined', { reason: value('decline-reason') || 'declined' })]);
      }, 'danger').id = 'decline';
      return;
    }
    if (['completed', 'failed', 'declined', 'expired', 'cancelled', 'superseded', 'delegated'].indexOf(s) >= 0) {
      add(app, el('p', 'This request is ' + s + '.', 'notice')).id = 'final';
      return;
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

    var c = form('Ask to confirm', 'confirm-form');
    field(c, 'What you are about to do', 'text', 'confirm-action');
    field(c, 'Consequences', 'text', 'confirm-consequences');
    var rev = field(c, 'Reversible', 'checkbox', 'confirm-reversible');
    button(c, 'Ask for confirmation', function () {
      send([status('needs_confirmation', { action: value('confirm-action'), consequences: value('confirm-consequences'), reversible: rev.checked })]);
    }).id = 'ask-confirm';

    var w = form('Waiting or on hold', 'wait-form');
    field(w, 'What for / why', 'text', 'wait-note');
    button(w, 'Waiting', function () { send([status('waiting', { waiting_for: { type: 'condition', note: value('wait-note') || 'waiting' } })]); }, 'secondary').id = 'wait';
    button(w, 'Hold', function () { send([status('held', { reason: value('wait-note') || 'on hold' })]); }, 'secondary').id = 'hold';

    var done = add(app, el('section')); done.id = 'complete';
    add(done, el('h2', 'Done'));
    field(done, 'Answer', 'textarea', 'answer-text');
    var camera = field(done, 'Take a photo', 'file', 'camera');
    camera.accept = 'image/*'; camera.setAttribute('capture', 'environment');
    var photos = field(done, 'Photos from the phone', 'file', 'photos');
    photos.accept = 'image/*'; photos.multiple = true;
    var files = field(done, 'Files', 'file', 'files');
    files.multiple = true;
    var audio = null;
    if (window.MediaRecorder && navigator.mediaDevices) {
      var chunks = [];
      var rb = button(done, 'Record audio', function () {
        if (recorder) { recorder.stop(); return; }
        navigator.mediaDevices.getUserMedia({ audio: true }).then(function (stream) {
          chunks = []; var rec = new MediaRecorder(stream); recorder = rec;
          rec.ondataavailable = function (e) { chunks.push(e.data); };
          rec.onstop = function () {
            stream.getTracks().forEach(function (tr) { tr.stop(); });
            audio = new Blob(chunks, { type: rec.mimeType || 'audio/webm' }); recorder = null; rb.textContent = 'Record again';
          };
          rec.start(); rb.textContent = 'Stop recording';
        }).catch(function (e) { note('No microphone: ' + e.message, true); });
      }, 'secondary');
      rb.id = 'record';
    }
    var where = null;
    if (navigator.geolocation) {
      button(done, 'Add my location', function () {
        navigator.geolocation.getCurrentPosition(function (pos) {
          where = { lat: pos.coords.latitude, lng: pos.coords.longitude, accuracy: pos.coords.accuracy };
          note('Location added.');
        }, function (e) { note('No location: ' + e.message, true); });
      }, 'secondary').id = 'locate';
    }
    var ok = field(done, 'Confirm it is done', 'checkbox', 'confirmed');
    button(done, 'Complete', function () {
      var content = [];
      if (value('answer-text')) content.push(value('answer-text'));
      Promise.all([].map.call(camera.files, function (f) { return media('image', f); })
        .concat([].map.call(photos.files, function (f) { return media('image', f); }))
        .concat([].map.call(files.files, function (f) { return media('file', f); }))
        .concat(audio ? [media('audio', audio)] : [])).then(function (items) {
        content = content.concat(items);
        if (where) content.push({ location: where });
        if (ok.checked) content.push({ confirmation: true });
        if (!content.length) { note('Add an answer, a photo, a file or a confirmation first.', true); return; }
        send([status('completed'), { response: { re: thread.envelope.ref, content: content } }]);
      });
    }).id = 'complete-button';

    var f = form('Could not do it', 'fail-form');
    field(f, 'What went wrong', 'text', 'fail-reason');
    button(f, 'Report failure', function () { send([status('failed', { reason: value('fail-reason') || 'failed' })]); }, 'danger').id = 'fail';
  }

  // "20m", "1h", "90 min" as ISO 8601 (PT20M); anything else is sent as typed.
  function isoDuration(text) {
    var m = /^(\d+)\s*(m|min|mins|minutes?|h|hr|hrs|hours?)$/i.exec(text);
    if (!m) return text;
    return 'PT' + m[1] + (m[2].charAt(0).toLowerCase() === 'h' ? 'H' : 'M');
  }

  function media(kind, blob) {
    return new Promise(function (resolve) {
      var r = new FileReader();
      r.onerror = function () { resolve({ text: 'could not read ' + (blob.name || kind) }); };
      r.onload = function () {
        var entry = {}; entry[kind] = { uri: r.result, mime: blob.type || 'application/octet-stream' };
        if (blob.name) entry[kind].name = blob.name;
        resolve(entry);
      };
      r.readAsDataURL(blob);
    });
  }

  function note(text, bad) {
    var out = document.getElementById('result');
    if (!out) return;
    out.textContent = '';
    add(out, el('p', text, bad ? 'error' : 'notice'));
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
    return fetch(api + withToken, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Accept': 'application/json' },
      body: body
    }).then(function (r) {
      return r.json().then(function (body) {
        if (!r.ok) { busy(false); note((body.error && body.error.message) || ('failed: HTTP ' + r.status), true); return; }
        return load().then(function () { note('Sent.'); });
      });
    }).catch(function (e) { busy(false); note('Could not send: ' + e.message, true); });
  }

  function load() {
    return fetch(api + withToken, { headers: { 'Accept': 'application/json' } }).then(function (r) {
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
  // new status, which changes the actions, redraws the page.
  function refresh() {
    var before = thread && thread.envelope.status;
    return fetch(api + withToken, { headers: { 'Accept': 'application/json' } }).then(function (r) {
      if (!r.ok) return load();
      return r.json().then(function (t) {
        if (!thread || t.envelope.status !== before) { stopRecording(); render(t); return; }
        thread = t;
        var old = document.getElementById('history');
        if (old) old.replaceWith(historyNode(t));
      });
    }).catch(function () { /* the next event tries again */ });
  }

  if (!ref || !token) { fail('The link is incomplete: it needs a ref and a token.'); return; }
  load().then(function () {
    if (!thread || !window.EventSource) return;
    // The agent's replies (and any change) arrive as they happen.
    var events = new EventSource(api + '/events' + withToken);
    events.addEventListener('thread', refresh);
    events.addEventListener('lagged', refresh);
    events.addEventListener('open', refresh);
  });
})();
