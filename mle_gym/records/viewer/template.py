"""The page's own style sheet and script, inline in every page (their hashes go in its Content-Security-Policy)."""

from __future__ import annotations

from mle_gym.records.viewer.plots import PALETTE

_CSS = """
:root{--fg:#1d1d1f;--dim:#666;--bg:#fff;--card:#f6f7f9;--line:#dde1e6;--bad:#b3261e;--ok:#1e7b34;--hit:#ffe066}
*{box-sizing:border-box}
body{margin:0;font:15px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;color:var(--fg);background:var(--bg)}
main{max-width:1100px;margin:0 auto;padding:12px}
h1{font-size:1.35em;margin:.3em 0}h2{font-size:1.15em;margin:1.2em 0 .4em;overflow-wrap:anywhere}
h3{font-size:1em;margin:1em 0 .3em}
pre,code{font:13px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{white-space:pre-wrap;overflow-wrap:anywhere;word-break:break-word;margin:.3em 0;padding:.5em;
 background:var(--card);border:1px solid var(--line);border-radius:6px;max-height:32em;overflow-y:auto}
code{overflow-wrap:anywhere}
.tablewrap{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;font-size:.9em}
th,td{border-bottom:1px solid var(--line);padding:.3em .6em;text-align:left;white-space:nowrap}
th{background:var(--card)}
.banner{background:#fff3cd;border:2px solid #e0a800;padding:.5em .8em;border-radius:6px;font-weight:600}
.banner.small{font-size:.85em;padding:.2em .5em}
.warn{color:var(--bad);overflow-wrap:anywhere}
.dim{color:var(--dim);overflow-wrap:anywhere}
.notes{font-size:.9em;color:var(--dim);overflow-wrap:anywhere}
figure{margin:.4em 0}figcaption{font-size:.9em;font-weight:600;overflow-wrap:anywhere}
svg.plot{width:100%;height:auto;max-width:720px;display:block}
svg .tick{font-size:12px;fill:#555}svg .lbl{font-size:13px;fill:#222}
.toolbar{position:sticky;top:0;z-index:2;background:var(--bg);padding:.5em 0;border-bottom:1px solid var(--line);
 display:flex;flex-wrap:wrap;gap:.4em;align-items:center}
.toolbar input{flex:1 1 12em;min-width:0;font-size:16px;padding:.35em .5em;border:1px solid #aaa;border-radius:6px}
.toolbar button{font-size:14px;padding:.35em .7em}
details.episode{border:1px solid var(--line);border-radius:8px;margin:.5em 0;background:var(--bg)}
details.episode>summary{padding:.5em .7em;cursor:pointer;overflow-wrap:anywhere}
details.episode>.body{padding:0 .7em .7em}
.comp{font-weight:600}
.badge{font-size:.8em;padding:.05em .45em;border-radius:4px;color:#fff}
.badge.ok{background:var(--ok)}.badge.bad{background:var(--bad)}
.medal{font-size:.85em;font-weight:600}
.medal-gold{color:#9a7b00}.medal-silver{color:#6b7075}.medal-bronze{color:#8a4f1c}.medal-none{color:var(--dim)}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.1em .8em;margin:.4em 0;font-size:.9em}
dt{color:var(--dim)}dd{margin:0;overflow-wrap:anywhere;min-width:0}
.step{border-left:3px solid var(--line);padding:.2em 0 .2em .6em;margin:.7em 0;content-visibility:auto;contain-intrinsic-size:auto 12em}
.step.bad{border-left-color:var(--bad)}
.stephead{display:flex;flex-wrap:wrap;gap:.6em;align-items:baseline}
.idx{font-weight:700}
.tool{font-weight:600;color:#0b5cad}
.call{overflow-wrap:anywhere}.call.bad{color:var(--bad)}
pre.cmd{background:#eef4fb}pre.say{background:#f1f8ef}pre.err{background:#fdecea}pre.reasoning{background:#f7f2fb}
.model{margin:.2em 0}
.nohit{display:none}
mark{background:var(--hit);color:inherit}
.end{font-size:.9em;color:var(--dim)}
.grade{border-top:1px solid var(--line);margin-top:.5em;padding-top:.3em}.grade.bad{color:var(--bad)}
.swatch{display:inline-block;width:.8em;height:.8em;border-radius:50%;margin-right:.35em;vertical-align:-.05em}
.legend{list-style:none;padding:0;margin:.3em 0;font-size:.9em}.legend li{overflow-wrap:anywhere;margin:.15em 0}
table.compare th,table.compare td{white-space:normal;vertical-align:top;min-width:7.5em}
table.compare th.comp{overflow-wrap:anywhere;max-width:12em}
th.runcol{position:sticky;left:0;z-index:1;background:var(--card);text-align:left;min-width:9em;max-width:16em;
 overflow-wrap:anywhere;font-weight:600}
table.compare tr.baseline td{background:#f3f8ff}
.v{font-weight:600;white-space:nowrap}.delta{font-size:.85em;white-space:nowrap}
.delta.up{color:var(--ok)}.delta.down{color:var(--bad)}td.none{color:var(--dim)}
.pair{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,420px),1fr));gap:.5em}
svg .lane{font-size:13px;font-weight:600}
figure.timeline svg.plot{max-width:640px}
.runmeta{font-size:.85em}.small{font-size:.8em;margin:.1em 0}
.branches{overflow-x:auto}
ul.tree,ul.tree ul{list-style:none;margin:.15em 0;padding-left:0}
ul.tree ul{border-left:2px solid var(--line);margin-left:.35em;padding-left:.9em}
ul.tree li{margin:.3em 0;overflow-wrap:anywhere;min-width:14em}
.how{font-weight:600}
@media (max-width:600px){body{font-size:14px}main{padding:8px}pre{font-size:12px;max-height:24em}
 svg .tick{font-size:19px}svg .lbl{font-size:20px}svg .lane{font-size:20px}
 table.compare th,table.compare td{min-width:6.5em}th.runcol{min-width:5.5em;max-width:7em}
 th.runcol .dim{display:none}ul.tree ul{padding-left:.5em;margin-left:.2em}}
"""

# A class per run colour (a style attribute would be blocked by the page's CSP).
_CSS += "".join(f".c{i}{{background:{colour}}}" for i, colour in enumerate(PALETTE)) + "\n"

_JS = """
(function(){
  var input=document.getElementById('q'), count=document.getElementById('count');
  var episodes=Array.prototype.slice.call(document.querySelectorAll('details.episode'));
  var MAX_MARKS=2000, timer=null;
  function unmark(){
    var marks=document.querySelectorAll('mark');
    for(var i=0;i<marks.length;i++){var m=marks[i], p=m.parentNode; p.replaceChild(document.createTextNode(m.textContent), m); p.normalize();}
  }
  function mark(root, q, budget){
    var walker=document.createTreeWalker(root, NodeFilter.SHOW_TEXT, null), nodes=[], n;
    while((n=walker.nextNode())){ if(n.nodeValue.toLowerCase().indexOf(q)>=0) nodes.push(n); }
    var made=0;
    for(var i=0;i<nodes.length && made<budget;i++){
      var node=nodes[i], text=node.nodeValue, low=text.toLowerCase(), frag=document.createDocumentFragment(), at=0, k;
      while((k=low.indexOf(q, at))>=0 && made<budget){
        frag.appendChild(document.createTextNode(text.slice(at,k)));
        var m=document.createElement('mark'); m.textContent=text.slice(k,k+q.length); frag.appendChild(m);
        at=k+q.length; made++;
      }
      frag.appendChild(document.createTextNode(text.slice(at)));
      node.parentNode.replaceChild(frag, node);
    }
    return made;
  }
  var openedBySearch=[];
  function run(){
    var q=input.value.trim().toLowerCase(); unmark();
    // Episodes the search opened close again when it changes: a cleared search over a big run
    // must not leave every transcript laid out at once.
    openedBySearch.forEach(function(ep){ ep.open=false; }); openedBySearch=[];
    var steps=0, eps=0, budget=MAX_MARKS;
    episodes.forEach(function(ep){
      var hits=0;
      ep.querySelectorAll('.step').forEach(function(st){
        var hit=!q || st.textContent.toLowerCase().indexOf(q)>=0;
        st.classList.toggle('nohit', !hit);
        if(q && hit){
          hits++;
          if(budget>0) budget-=mark(st, q, budget);
          st.querySelectorAll('details').forEach(function(d){ if(d.textContent.toLowerCase().indexOf(q)>=0) d.open=true; });
        }
      });
      ep.hidden = !!q && hits===0;
      if(q && hits && !ep.open){ ep.open=true; openedBySearch.push(ep); }
      steps+=hits; if(hits) eps++;
    });
    count.textContent = q ? (steps+' step'+(steps===1?'':'s')+' in '+eps+' episode'+(eps===1?'':'s')) : '';
    var first=document.querySelector('.step:not(.nohit) mark');
    if(q && first) first.scrollIntoView({block:'center'});
  }
  input.addEventListener('input', function(){ clearTimeout(timer); timer=setTimeout(run, 200); });
  input.addEventListener('keydown', function(e){ if(e.key==='Enter'){ clearTimeout(timer); run(); } });
  document.getElementById('expand').addEventListener('click', function(){ episodes.forEach(function(e){ if(!e.hidden) e.open=true; }); });
  document.getElementById('collapse').addEventListener('click', function(){ episodes.forEach(function(e){ e.open=false; }); });
  function openHash(){ var el=location.hash && document.getElementById(location.hash.slice(1)); if(el && el.tagName==='DETAILS') el.open=true; }
  window.addEventListener('hashchange', openHash); openHash();
})();
"""
