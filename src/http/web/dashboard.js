// The operator dashboard: reads the exchange's /dashboard/api with the session cookie and draws threads, executors, the job queue, shells and throughput.
// Every value from the exchange is rendered as text (textContent, never innerHTML): intents,
// ids and errors come from agents and are hostile until proven otherwise.
'use strict';
(function () {
  var VIEWS = ['threads', 'executors', 'queue', 'shells', 'throughput'];
  var STATES = ['received', 'executing', 'finished', 'canceled'];
  var SHELVES = ['queue', 'failed', 'sent', 'done'];
  // Distinct in light and dark alike; the legend and each bar's title carry the name too.
  var PALETTE = ['#2563eb', '#15803d', '#b45309', '#9333ea', '#0891b2', '#dc2626', '#65a30d', '#db2777', '#64748b', '#ca8a04'];

  var view = { tab: null, ref: null, state: '', q: '', shelf: 'queue', days: 14 };
  var overview = null;
  var chartData = null;
  var events = null;
  // The exchange's clock minus ours, so "3 min ago" is true even when this machine's clock is not.
  var skew = 0;

  function $(id) { return document.getElementById(id); }
  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }
  function add(parent, child) { parent.appendChild(child); return child; }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }
  function words(code) { return code === null || code === undefined || code === '' ? '—' : String(code).replace(/_/g, ' '); }
  function num(n) { return n === null || n === undefined ? '—' : Number(n).toLocaleString(); }
  function debounce(fn, ms) {
    var timer;
    return function () { clearTimeout(timer); timer = setTimeout(fn, ms); };
  }
  // Answers can arrive out of order (a slow search, then a fast one): only the newest request
  // of each kind may draw.
  var asked = {};
  function fresh(kind) {
    var n = asked[kind] = (asked[kind] || 0) + 1;
    return function () { return asked[kind] === n; };
  }

  // ---- Times: relative, with the exact local time as the title.
  function relative(iso) {
    var t = new Date(iso).getTime();
    if (isNaN(t)) return String(iso);
    var secs = Math.round((t - Date.now() - skew) / 1000), past = secs <= 0, a = Math.abs(secs), n, unit;
    if (a < 45) return past ? 'just now' : 'in a moment';
    if (a < 45 * 60) { n = Math.max(1, Math.round(a / 60)); unit = 'min'; }
    else if (a < 36 * 3600) { n = Math.round(a / 3600); unit = 'h'; }
    else { n = Math.round(a / 86400); unit = n === 1 ? 'day' : 'days'; }
    return past ? n + ' ' + unit + ' ago' : 'in ' + n + ' ' + unit;
  }
  function fullTime(iso) {
    var d = new Date(iso);
    return isNaN(d.getTime()) ? String(iso)
      : d.toLocaleString(undefined, { weekday: 'short', day: 'numeric', month: 'short', year: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit' });
  }
  function timeNode(iso) {
    if (!iso) return el('span', '—', 'none');
    var t = el('time', relative(iso), 'rel');
    t.dateTime = String(iso);
    t.title = fullTime(iso);
    return t;
  }
  function refreshTimes() {
    [].forEach.call(document.querySelectorAll('time.rel'), function (t) { t.textContent = relative(t.dateTime); });
  }
  setInterval(refreshTimes, 30000);
  document.addEventListener('visibilitychange', function () { if (!document.hidden) refreshTimes(); });

  // ---- Talking to the exchange.
  function api(path, options) {
    options = options || {};
    var headers = { 'x-mess-dashboard': '1', 'accept': 'application/json' };
    var init = { credentials: 'same-origin', headers: headers, cache: 'no-store' };
    if (options.body !== undefined) {
      init.method = 'POST';
      headers['content-type'] = 'application/json';
      init.body = JSON.stringify(options.body);
    }
    return fetch(path, init).then(function (r) {
      if (r.status === 401) {
        signedOut();
        var out = new Error('signed out'); out.quiet = true;
        throw out;
      }
      return r.json().then(null, function () { return null; }).then(function (body) {
        if (r.ok) return body;
        var said = body && body.error;
        var e = new Error((said && said.message) || 'The exchange answered HTTP ' + r.status + '.');
        e.status = r.status;
        e.code = said && said.code;
        throw e;
      });
    }, function (e) {
      throw new Error('The exchange cannot be reached (' + e.message + '). Is mess serve running?');
    });
  }

  function problem(e) {
    if (e && e.quiet) return;
    $('problem-text').textContent = e && e.message ? e.message : String(e);
    $('problem').hidden = false;
  }
  function notice(text) {
    var box = $('notice');
    box.textContent = text;
    box.hidden = false;
    clearTimeout(notice.timer);
    notice.timer = setTimeout(function () { box.hidden = true; }, 4000);
  }
  function signedOut() {
    $('dashboard').hidden = true;
    $('problem').hidden = true;
    $('signin').hidden = false;
    // A dead session makes the stream fail forever; the sign-in link reloads the page anyway.
    if (events) { events.close(); events = null; }
    setLive(false);
  }

  // ---- Small building blocks shared by the views.
  var BADGE = {
    pending: 'New', claimed: 'Taken', in_progress: 'In progress', needs_input: 'Waiting for an answer',
    needs_confirmation: 'Waiting for a yes', waiting: 'Waiting', held: 'On hold', retrying: 'Trying again',
    completed: 'Done', partial: 'Done in part', failed: 'Could not be done', declined: 'Declined',
    expired: 'Expired', cancelled: 'Cancelled', superseded: 'Replaced', delegated: 'Passed on'
  };
  function badge(status) {
    var b = el('span', BADGE[status] || words(status), 'status');
    b.dataset.code = status || '';
    return b;
  }
  function shortRef(ref) {
    var s = String(ref);
    return s.length > 12 ? s.slice(0, 10) + '…' : s;
  }
  function tags(list) {
    var box = el('div', null, 'tags');
    [].concat(list || []).forEach(function (t) { add(box, el('span', t, 'tag')); });
    if (!box.childNodes.length) box.textContent = '—';
    return box;
  }
  // Each cell holds one wrapper, so the phone's card layout (label | value) stays two columns;
  // data-label is what the card shows as the field's name.
  function cell(tr, label, content, cls) {
    var td = add(tr, el('td', null, cls));
    td.dataset.label = label;
    var v = add(td, el('div', null, 'v'));
    if (content instanceof Node) add(v, content);
    else v.textContent = content === null || content === undefined || content === '' ? '—' : String(content);
    return td;
  }
  function emptyRow(tbody, columns, text) {
    var td = add(add(tbody, el('tr', null, 'empty')), el('td', text, 'empty'));
    td.colSpan = columns;
  }
  var NUMERIC = ['#', 'Rank', 'Attempts'];
  function table(parent, id, headings) {
    var t = add(parent, el('table', null, 'grid compact'));
    var tr = add(add(t, el('thead')), el('tr'));
    headings.forEach(function (h) {
      var th = add(tr, el('th', h, NUMERIC.indexOf(h) >= 0 ? 'num' : ''));
      th.scope = 'col';
    });
    var body = add(t, el('tbody'));
    if (id) body.id = id;
    return body;
  }
  function threadLink(ref) {
    var b = el('button', shortRef(ref), 'link ref');
    b.type = 'button';
    b.title = String(ref);
    b.setAttribute('aria-label', 'Open thread ' + ref);
    b.addEventListener('click', function (e) { e.stopPropagation(); openThread(ref); });
    return b;
  }

  // ---- Where we are: the tab and an open thread live in the address, so a reload or a
  // shared link lands on the same view.
  function parseHash() {
    var h = location.hash.replace(/^#/, '');
    if (h.indexOf('thread=') === 0) {
      var ref;
      try { ref = decodeURIComponent(h.slice(7)); } catch (e) { ref = h.slice(7); }
      return { tab: 'threads', ref: ref || null };
    }
    return { tab: VIEWS.indexOf(h) >= 0 ? h : 'threads', ref: null };
  }
  // pushState, not location.hash: the tab names are also the sections' ids, and a fragment
  // navigation would scroll the page to them.
  function go(hash) {
    if (location.hash !== '#' + hash) history.pushState(null, '', '#' + hash);
    applyHash();
  }
  function openThread(ref) { go('thread=' + encodeURIComponent(ref)); }

  function applyHash() {
    var next = parseHash();
    var changedTab = next.tab !== view.tab;
    var opened = next.ref && next.ref !== view.ref;
    view.tab = next.tab;
    view.ref = next.ref;
    showTab();
    if (changedTab) loadView();
    if (view.ref) loadThread(opened);
    else hideDetail();
  }
  function showTab() {
    VIEWS.forEach(function (name) {
      var tab = $('tab-' + name);
      tab.setAttribute('aria-selected', name === view.tab ? 'true' : 'false');
      tab.tabIndex = name === view.tab ? 0 : -1;
      $(name).hidden = name !== view.tab;
      if (name === view.tab) reveal(tab);
    });
  }
  // On a phone the tab strip scrolls sideways; the current tab is scrolled into it (by hand:
  // scrollIntoView could move the page as well).
  function reveal(tab) {
    var strip = tab.parentNode, r = tab.getBoundingClientRect(), s = strip.getBoundingClientRect();
    if (r.left < s.left) strip.scrollLeft -= s.left - r.left + 16;
    else if (r.right > s.right) strip.scrollLeft += r.right - s.right + 16;
  }

  function loadView() {
    var load = { threads: loadThreads, executors: loadExecutors, queue: loadQueue, shells: loadShells, throughput: loadThroughput }[view.tab];
    return load();
  }
  // Something changed somewhere: the counts, the current list and an open thread are redrawn
  // in place; the search text, the filters and the scroll position stay.
  function refresh() {
    loadOverview().catch(problem);
    loadView();
    if (view.ref) loadThread(false);
  }

  // ---- Overview: the header, the chips' counts, the queue summary and "Waiting now".
  function loadOverview() {
    var ok = fresh('overview');
    return api('/dashboard/api/overview').then(function (o) {
      if (ok()) renderOverview(o);
      return o;
    });
  }
  function renderOverview(o) {
    overview = o;
    var t = Date.parse(o.now);
    if (!isNaN(t)) skew = t - Date.now();
    $('home').textContent = o.home || '';
    $('home').title = o.home ? 'The exchange\'s home directory' : '';
    $('version').textContent = o.version ? 'version ' + o.version : '';
    var states = o.states || {}, all = 0;
    STATES.forEach(function (s) {
      all += Number(states[s] || 0);
      $('state-' + s).querySelector('.count').textContent = num(states[s] || 0);
    });
    $('state-all').querySelector('.count').textContent = num(all);
    var failed = (o.jobs && o.jobs.failed) || 0;
    $('queue-failed').textContent = failed ? failed + ' failed' : '';
    renderQueueSummary();
    renderWaiting(o.pending_by_capability || []);
  }

  // ---- Threads.
  function loadThreads() {
    var ok = fresh('threads');
    pressed('state-', [''].concat(STATES), view.state);
    var query = '?state=' + encodeURIComponent(view.state) + '&q=' + encodeURIComponent(view.q) + '&limit=100';
    return api('/dashboard/api/threads' + query).then(function (data) {
      if (ok()) renderThreads(data);
    }).catch(problem);
  }
  function pressed(prefix, names, current) {
    names.forEach(function (n) { $(prefix + (n || 'all')).setAttribute('aria-pressed', n === current ? 'true' : 'false'); });
  }
  function renderThreads(data) {
    var body = clear($('thread-rows'));
    var rows = data.rows || [];
    if (!rows.length) {
      emptyRow(body, 6, view.q || view.state
        ? 'No threads match. Clear the search or pick All.'
        : 'No threads yet. An agent\'s request appears here as it arrives.');
    }
    rows.forEach(function (t) { add(body, threadRow(t)); });
    $('threads-more').hidden = !data.truncated;
    markOpenRow();
  }
  function threadRow(t) {
    var tr = el('tr', null, 'clickable');
    tr.dataset.ref = t.ref;
    cell(tr, 'Ref', threadLink(t.ref), 'mono');
    var intent = el('span', t.intent || '(no intent)');
    if (t.priority && t.priority !== 'normal') {
      var box = el('span');
      add(box, el('span', t.priority, 'tag priority'));
      add(box, intent);
      intent = box;
    }
    cell(tr, 'Intent', intent, 'intent');
    cell(tr, 'Status', badge(t.status));
    cell(tr, 'Executor', t.executor);
    cell(tr, 'Requestor', t.requestor);
    cell(tr, 'Updated', timeNode(t.updated));
    tr.addEventListener('click', function () { openThread(t.ref); });
    return tr;
  }
  function markOpenRow() {
    [].forEach.call($('thread-rows').querySelectorAll('tr[data-ref]'), function (tr) {
      var open = tr.dataset.ref === view.ref;
      tr.classList.toggle('current', open);
      if (open) tr.setAttribute('aria-current', 'true'); else tr.removeAttribute('aria-current');
    });
  }

  // ---- One thread, beside the list (or over it on a phone).
  function showDetail() {
    $('thread-detail').hidden = false;
    $('threads').classList.add('has-detail');
    document.body.classList.add('detail-open');
    markOpenRow();
  }
  function hideDetail() {
    var box = $('thread-detail'), was = box.dataset.ref;
    box.hidden = true;
    box.dataset.ref = '';
    $('threads').classList.remove('has-detail');
    document.body.classList.remove('detail-open');
    markOpenRow();
    // Back to where the operator was in the list.
    if (was && view.tab === 'threads') {
      var row = [].filter.call($('thread-rows').querySelectorAll('tr[data-ref]'), function (tr) { return tr.dataset.ref === was; })[0];
      var b = row && row.querySelector('button');
      if (b) b.focus();
    }
  }
  function loadThread(opened) {
    var ref = view.ref, ok = fresh('thread'), box = $('thread-detail');
    showDetail();
    if (box.dataset.ref !== ref) {
      add(clear($('detail-body')), el('p', 'Loading the thread…', 'meta'));
      box.dataset.ref = ref;
    }
    if (opened) $('close-detail').focus({ preventScroll: true });
    return api('/dashboard/api/thread?ref=' + encodeURIComponent(ref)).then(function (data) {
      if (ok() && view.ref === ref) renderThread(data);
    }).catch(function (e) {
      if (!ok()) return;
      if (e.status === 404) {
        var body = clear($('detail-body'));
        add(body, el('h2', 'No such thread'));
        add(body, el('p', 'This exchange has no thread ' + ref + '.', 'error'));
        return;
      }
      problem(e);
    });
  }

  function renderThread(data) {
    var box = $('thread-detail'), top = box.scrollTop;
    var t = data.thread || {};
    var body = clear($('detail-body'));
    var head = add(body, el('header', null, 'detail-head'));
    add(head, badge(t.status));
    add(head, el('h2', t.intent || '(no intent)')).id = 'detail-intent';
    var meta = add(head, el('p', null, 'meta'));
    add(meta, el('code', t.ref, 'ref'));
    add(meta, document.createTextNode(' · ' + words(t.state) + (t.priority && t.priority !== 'normal' ? ' · ' + t.priority + ' priority' : '')));

    var facts = add(body, el('dl', null, 'facts'));
    fact(facts, 'From', t.requestor);
    fact(facts, 'Executor', t.executor || 'nobody yet');
    fact(facts, 'Created', timeNode(t.created));
    fact(facts, 'Updated', timeNode(t.updated));
    if (t.needed_by) fact(facts, 'Needed by', timeNode(t.needed_by));
    if (t.requires && t.requires.length) fact(facts, 'Requires', tags(t.requires));

    renderTimeline(part(body, 'What happened'), data.history || []);
    renderMessages(part(body, 'Messages'), data.messages || []);
    renderRoute(part(body, 'Why it was offered to whom'), data.route || []);
    renderThreadJobs(part(body, 'Jobs'), data.jobs || []);
    box.scrollTop = top;
  }
  function part(parent, title) {
    var s = add(parent, el('section', null, 'part'));
    add(s, el('h3', title));
    return s;
  }
  function fact(dl, name, value) {
    add(dl, el('dt', name));
    var dd = add(dl, el('dd'));
    if (value instanceof Node) add(dd, value); else dd.textContent = value || '—';
  }
  function renderTimeline(parent, history) {
    var list = add(parent, el('ol', null, 'timeline'));
    list.id = 'timeline';
    if (!history.length) add(list, el('li', 'Nothing has happened yet.', 'meta'));
    history.forEach(function (h) {
      var li = add(list, el('li'));
      li.dataset.seq = h.seq;
      var line = add(li, el('div'));
      add(line, el('strong', words(h.action)));
      if (h.by) add(line, document.createTextNode(' by ' + h.by));
      add(line, document.createTextNode(' · '));
      add(line, timeNode(h.at));
      if (h.note) add(li, el('div', h.note, 'note'));
    });
  }
  function renderMessages(parent, messages) {
    if (!messages.length) { add(parent, el('p', 'No messages yet.', 'meta')); return; }
    var body = table(parent, 'messages', ['#', 'From', 'Kinds', 'Received']);
    messages.forEach(function (m) {
      var tr = add(body, el('tr'));
      cell(tr, '#', m.seq, 'num');
      cell(tr, 'From', m.from);
      cell(tr, 'Kinds', tags(m.kinds));
      cell(tr, 'Received', timeNode(m.received));
    });
  }
  function renderRoute(parent, route) {
    var body = table(parent, null, ['Rank', 'Executor', 'Rule', 'Reason']);
    body.parentNode.id = 'route';
    if (!route.length) emptyRow(body, 4, 'No routing decision is recorded: no executor was eligible, or the thread was never offered.');
    route.forEach(function (r) {
      var tr = add(body, el('tr'));
      cell(tr, 'Rank', r.rank, 'num');
      cell(tr, 'Executor', r.executor);
      cell(tr, 'Rule', r.rule, 'mono');
      cell(tr, 'Reason', r.reason);
    });
  }
  function renderThreadJobs(parent, jobs) {
    if (!jobs.length) { add(parent, el('p', 'No jobs: nothing was sent on for this thread.', 'meta')); return; }
    var body = table(parent, 'thread-job-rows', ['Executor', 'Work', 'Kind', 'Attempts', 'Due or outcome', 'Last error', 'Action']);
    // A row from the thread says its shelf when the server knows it; without one, no buttons.
    jobs.forEach(function (j) { add(body, jobRow(j, j.shelf || null, false)); });
  }

  // ---- Executors.
  function loadExecutors() {
    var ok = fresh('executors');
    return api('/dashboard/api/executors').then(function (data) {
      if (ok()) renderExecutors(data);
    }).catch(problem);
  }
  function renderExecutors(data) {
    var body = clear($('executor-rows'));
    var rows = data.rows || [];
    if (!rows.length) emptyRow(body, 7, 'No executors yet. Add one to the exchange\'s configuration and it appears here with its capabilities.');
    rows.forEach(function (x) {
      var tr = add(body, el('tr'));
      tr.dataset.id = x.id;
      var who = el('div');
      add(who, el('strong', x.name || x.id));
      if (x.name && x.name !== x.id) add(who, el('div', x.id, 'meta mono'));
      if (x.source) add(who, el('div', 'from ' + x.source, 'meta'));
      cell(tr, 'Executor', who);
      cell(tr, 'Capabilities', tags(x.capabilities));
      cell(tr, 'Availability', availability(x));
      cell(tr, 'Open claims', num(x.open_claims), 'num');
      var done = el('div', num(x.completed) + ' done · ' + num(x.failed) + ' failed');
      add(done, el('div', num(x.worked) + ' taken in all', 'meta'));
      cell(tr, 'Completed / failed', done);
      cell(tr, 'Rating', x.avg_rating === null || x.avg_rating === undefined ? '—' : Number(x.avg_rating).toFixed(1), 'num');
      cell(tr, 'Score', x.score === null || x.score === undefined ? '—' : String(Math.round(Number(x.score) * 100) / 100), 'num');
    });
  }
  // The dot has words beside it: colour alone says nothing to some eyes.
  function availability(x) {
    var box = el('div');
    var line = add(box, el('div'));
    if (x.available_now === true || x.available_now === false) {
      add(line, el('span', null, 'dot ' + (x.available_now ? 'on' : 'off'))).setAttribute('aria-hidden', 'true');
      add(line, document.createTextNode(x.available_now ? 'Available now' : 'Not available now'));
    } else {
      line.textContent = words(x.availability);
    }
    var more = [x.available_now === null || x.available_now === undefined ? '' : x.availability, x.schedule, x.timezone]
      .filter(function (s) { return s; }).map(String);
    if (more.length) add(box, el('div', more.join(' · '), 'meta'));
    return box;
  }

  // ---- Queue: jobs the exchange sends on (notices, forwards, callbacks, …), by shelf.
  function loadQueue() {
    var ok = fresh('queue');
    pressed('shelf-', SHELVES, view.shelf);
    return api('/dashboard/api/jobs?shelf=' + encodeURIComponent(view.shelf)).then(function (data) {
      if (ok()) renderQueue(data);
    }).catch(problem);
  }
  function renderQueue(data) {
    var counts = data.counts || {};
    SHELVES.forEach(function (s) { $('shelf-' + s).querySelector('.count').textContent = num(counts[s] || 0); });
    var body = clear($('job-rows'));
    var rows = data.rows || [];
    if (!rows.length) {
      emptyRow(body, 8, {
        queue: 'Nothing queued: every notice and forward has gone out.',
        failed: 'No failed jobs. A job that gives up after its retries lands here, to retry by hand.',
        sent: 'Nothing sent yet.',
        done: 'No finished jobs yet.'
      }[view.shelf]);
    }
    rows.forEach(function (j) { add(body, jobRow(j, view.shelf, true)); });
  }
  function renderQueueSummary() {
    var jobs = (overview && overview.jobs) || {};
    $('queue-summary').textContent = num(jobs.due || 0) + ' due now · ' + num(jobs.retrying || 0) + ' retrying · ' +
      num(jobs.queued || 0) + ' queued in all';
  }
  function jobRow(j, shelf, withThread) {
    var tr = el('tr');
    tr.dataset.id = j.id;
    if (withThread) cell(tr, 'Thread', j.thread ? threadLink(j.thread) : '—', 'mono');
    cell(tr, 'Executor', j.executor);
    cell(tr, 'Work', words(j.job) + (j.channel ? ' via ' + j.channel : ''));
    cell(tr, 'Kind', words(j.kind));
    cell(tr, 'Attempts', num(j.attempts), 'num');
    cell(tr, 'Due or outcome', dueOrOutcome(j));
    cell(tr, 'Last error', lastError(j.last_error), 'error-cell');
    cell(tr, '', actionFor(j, shelf), 'action');
    return tr;
  }
  function dueOrOutcome(j) {
    var box = el('div');
    if (j.outcome) {
      add(box, el('div', j.outcome));
      if (j.last_attempt) add(add(box, el('div', null, 'meta')), timeNode(j.last_attempt));
    } else if (j.due) {
      add(box, document.createTextNode('due '));
      add(box, timeNode(j.due));
    } else {
      box.textContent = '—';
    }
    return box;
  }
  function lastError(text) {
    if (!text) return el('span', '—', 'none');
    var s = String(text);
    var e = el('span', s.length > 200 ? s.slice(0, 200) + '…' : s, 'mono err');
    e.title = s;
    return e;
  }
  function actionFor(j, shelf) {
    if (shelf === 'failed') return actionButton('Retry', 'retry', j);
    if (shelf === 'queue') return actionButton('Cancel', 'cancel', j);
    return el('span');
  }
  function actionButton(label, kind, j) {
    var b = el('button', label, kind);
    b.type = 'button';
    b.setAttribute('aria-label', label + ' job ' + j.id);
    b.addEventListener('click', function (e) { e.stopPropagation(); jobAction(kind, j, b); });
    return b;
  }
  function jobAction(kind, j, b) {
    if (kind === 'cancel' && !confirm('Cancel this ' + words(j.job) + ' job' + (j.executor ? ' for ' + j.executor : '') +
      '? It moves to Failed as "canceled by operator".')) return;
    b.disabled = true;
    api('/dashboard/api/jobs/' + kind, { body: { id: j.id } }).then(function () {
      notice(kind === 'retry' ? 'Job ' + j.id + ' is back in the queue, due now.' : 'Job ' + j.id + ' was canceled; it is on the Failed shelf.');
      refresh();
    }).catch(function (e) {
      problem(e);
      // Most refusals mean the job moved meanwhile (another operator, the worker): show where it is now.
      if (!e.quiet) refresh();
    });
  }

  // ---- Shells.
  function loadShells() {
    var ok = fresh('shells');
    return api('/dashboard/api/shells').then(function (data) {
      if (ok()) renderShells(data);
    }).catch(problem);
  }
  function renderShells(data) {
    var balances = clear($('balance-rows')), ledger = clear($('ledger-rows'));
    var b = data.balances || [], l = data.ledger || [];
    if (!b.length) emptyRow(balances, 2, 'No account holds shells yet. Balances appear after the first settlement.');
    b.forEach(function (a) {
      var tr = add(balances, el('tr'));
      cell(tr, 'Account', a.account);
      cell(tr, 'Shells', num(a.shells), 'num');
    });
    if (!l.length) emptyRow(ledger, 7, 'No shells have moved yet. Settlements and transfers appear here, newest first.');
    l.forEach(function (x) {
      var tr = add(ledger, el('tr'));
      tr.dataset.id = x.id;
      cell(tr, 'When', timeNode(x.at));
      cell(tr, 'From', x.from);
      cell(tr, 'To', x.to);
      cell(tr, 'Shells', num(x.shells), 'num');
      cell(tr, 'Kind', words(x.kind));
      cell(tr, 'Thread', x.thread ? threadLink(x.thread) : '—', 'mono');
      cell(tr, 'Note', x.note);
    });
  }

  // ---- Throughput: stacked completions per executor per day, requests created as a line.
  function loadThroughput() {
    var ok = fresh('throughput');
    return api('/dashboard/api/throughput?days=' + encodeURIComponent(view.days)).then(function (data) {
      if (!ok()) return;
      chartData = data;
      renderThroughput(data);
    }).catch(problem);
  }
  var SVG = 'http://www.w3.org/2000/svg';
  function svg(parent, tag, attrs, text) {
    var node = document.createElementNS(SVG, tag);
    Object.keys(attrs).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text !== undefined) node.textContent = String(text);
    parent.appendChild(node);
    return node;
  }
  function renderThroughput(data) {
    var chart = clear($('throughput-chart'));
    var days = data.days || [], series = data.series || [], created = data.created || [];
    // Drawn at the box's real width, so the labels stay readable on a phone.
    var W = Math.max(280, Math.floor(chart.parentNode.clientWidth || 640)), H = 240;
    var pad = { l: 36, r: 8, t: 14, b: 26 };
    chart.setAttribute('width', W);
    chart.setAttribute('height', H);
    chart.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
    var totals = days.map(function (d, i) {
      return series.reduce(function (sum, s) { return sum + Number((s.completed || [])[i] || 0); }, 0);
    });
    var max = Math.max.apply(null, [1].concat(totals, created.map(Number)));
    var plotH = H - pad.t - pad.b, slot = (W - pad.l - pad.r) / Math.max(1, days.length), bw = Math.max(2, slot * 0.7);
    function y(v) { return pad.t + plotH * (1 - v / max); }

    svg(chart, 'line', { x1: pad.l, x2: W - pad.r, y1: y(max), y2: y(max), 'class': 'gridline' });
    svg(chart, 'line', { x1: pad.l, x2: W - pad.r, y1: y(0), y2: y(0), 'class': 'axis' });
    svg(chart, 'text', { x: pad.l - 6, y: y(max) + 4, 'text-anchor': 'end', 'class': 'tick' }, max);
    svg(chart, 'text', { x: pad.l - 6, y: y(0) + 4, 'text-anchor': 'end', 'class': 'tick' }, 0);
    if (!days.length) svg(chart, 'text', { x: W / 2, y: H / 2, 'text-anchor': 'middle', 'class': 'tick' }, 'No days to show');

    var every = Math.ceil(days.length / Math.max(1, Math.floor((W - pad.l) / 28)));
    days.forEach(function (day, i) {
      var x = pad.l + i * slot + (slot - bw) / 2, acc = 0;
      series.forEach(function (s, k) {
        var v = Number((s.completed || [])[i] || 0);
        if (!v) return;
        var bar = svg(chart, 'rect', { x: x, y: y(acc + v), width: bw, height: y(acc) - y(acc + v), fill: PALETTE[k % PALETTE.length] });
        svg(bar, 'title', {}, day + ' · ' + s.executor + ': ' + v + ' completed');
        acc += v;
      });
      if (i % every === 0) {
        svg(chart, 'text', { x: x + bw / 2, y: H - 8, 'text-anchor': 'middle', 'class': 'tick' }, String(day).slice(-2).replace(/^0/, ''));
      }
    });
    if (created.length) {
      var points = created.map(function (n, i) { return (pad.l + i * slot + slot / 2) + ',' + y(Number(n || 0)); });
      svg(chart, 'polyline', { points: points.join(' '), 'class': 'created' });
      created.forEach(function (n, i) {
        var dot = svg(chart, 'circle', { cx: pad.l + i * slot + slot / 2, cy: y(Number(n || 0)), r: 3, 'class': 'created-dot' });
        svg(dot, 'title', {}, days[i] + ': ' + n + ' requests created');
      });
    }
    var done = totals.reduce(function (a, b) { return a + b; }, 0);
    var requested = created.reduce(function (a, b) { return a + Number(b || 0); }, 0);
    chart.setAttribute('aria-label', 'Completions per day per executor over ' + days.length + ' days: ' + done +
      ' completed, ' + requested + ' requests created, at most ' + max + ' on one day.');
    renderLegend(series, requested);
  }
  function renderLegend(series, requested) {
    var legend = clear($('legend'));
    series.forEach(function (s, k) {
      var li = add(legend, el('li'));
      add(li, el('span', null, 'swatch')).style.background = PALETTE[k % PALETTE.length];
      var sum = (s.completed || []).reduce(function (a, b) { return a + Number(b || 0); }, 0);
      add(li, document.createTextNode(s.executor + ' (' + sum + ')'));
    });
    var line = add(legend, el('li'));
    add(line, el('span', null, 'swatch line'));
    add(line, document.createTextNode('requests created (' + requested + ')'));
    if (!series.length) add(legend, el('li', 'No completions in these days yet.', 'meta'));
  }
  function renderWaiting(rows) {
    var list = clear($('waiting'));
    if (!rows.length) { add(list, el('li', 'Nothing is waiting: every request has been taken.', 'meta')); return; }
    var most = Math.max.apply(null, [1].concat(rows.map(function (r) { return Number(r.pending || 0); })));
    rows.forEach(function (r) {
      var li = add(list, el('li'));
      add(li, el('span', r.capability || '(any)', 'cap'));
      var track = add(li, el('span', null, 'track'));
      track.setAttribute('aria-hidden', 'true');
      add(track, el('span', null, 'fill')).style.width = (100 * Number(r.pending || 0) / most) + '%';
      add(li, el('span', num(r.pending) + ' waiting', 'n'));
      if (r.oldest) {
        var since = add(li, el('span', 'oldest ', 'meta oldest'));
        add(since, timeNode(r.oldest));
      }
    });
  }

  // ---- Live updates: any event means something changed; a burst becomes one refresh.
  function setLive(on) {
    var live = $('live');
    live.className = 'live ' + (on ? 'on' : 'off');
    live.textContent = on ? 'live' : 'offline';
  }
  function listen() {
    if (!window.EventSource || events) return;
    var soon = debounce(refresh, 400), lost = false;
    events = new EventSource('/dashboard/api/events');
    events.addEventListener('open', function () {
      setLive(true);
      // Changes made while the stream was down sent no events.
      if (lost) { lost = false; soon(); }
    });
    events.addEventListener('error', function () {
      setLive(false);
      lost = true;
      // A closed stream is not retried by the browser; the overview tells whether the
      // session ended (sign-in) or the server is gone (the banner).
      if (events && events.readyState === EventSource.CLOSED) {
        events = null;
        loadOverview().then(function () { setTimeout(listen, 5000); }, problem);
      }
    });
    ['message', 'change', 'thread', 'job', 'lagged'].forEach(function (name) { events.addEventListener(name, soon); });
  }

  // ---- Wiring.
  function wire() {
    $('problem-close').addEventListener('click', function () { $('problem').hidden = true; });
    VIEWS.forEach(function (name) {
      $('tab-' + name).addEventListener('click', function () { go(name); });
    });
    // Arrow keys move between tabs, as in any tab list.
    document.querySelector('.tabs').addEventListener('keydown', function (e) {
      var step = e.key === 'ArrowRight' ? 1 : e.key === 'ArrowLeft' ? -1 : 0;
      if (!step) return;
      var next = VIEWS[(VIEWS.indexOf(view.tab) + step + VIEWS.length) % VIEWS.length];
      $('tab-' + next).focus();
      go(next);
    });
    [''].concat(STATES).forEach(function (s) {
      $('state-' + (s || 'all')).addEventListener('click', function () { view.state = s; loadThreads(); });
    });
    var search = $('search');
    var searchSoon = debounce(function () { view.q = search.value.trim(); loadThreads(); }, 250);
    search.addEventListener('input', searchSoon);
    SHELVES.forEach(function (s) {
      $('shelf-' + s).addEventListener('click', function () { view.shelf = s; loadQueue(); });
    });
    $('days').addEventListener('change', function () { view.days = Number($('days').value) || 14; loadThroughput(); });
    $('close-detail').addEventListener('click', function () { go('threads'); });
    document.addEventListener('keydown', function (e) {
      if (e.key === 'Escape' && view.ref) go('threads');
    });
    window.addEventListener('hashchange', applyHash);
    window.addEventListener('popstate', applyHash);
    window.addEventListener('resize', debounce(function () {
      if (chartData && view.tab === 'throughput') renderThroughput(chartData);
    }, 150));
  }

  function start() {
    wire();
    function show() {
      $('signin').hidden = true;
      $('dashboard').hidden = false;
      applyHash();
      listen();
    }
    loadOverview().then(show, function (e) {
      if (e.quiet) return;
      // The page is still worth showing: the banner says what is wrong, the next event retries.
      problem(e);
      show();
    });
  }
  start();
})();
