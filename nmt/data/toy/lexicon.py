"""French and English lexicon of the built-in corpus (see :mod:`nmt.data.toy.grammar`).

Each table is one entry a line, fields separated by ``|``. Irregular forms are
spelt out; regular ones are derived by the rules in :mod:`nmt.data.toy.morphology`. The nouns are in
:mod:`nmt.data.toy.nouns`.
"""

from nmt.data.toy.nouns import NOUNS

__all__ = ["NOUNS", "ADJECTIVES", "VERBS", "PREPOSITIONS", "NUMBERS", "NAMES", "TIMES", "PRONOUNS",
           "OBJECT_PRONOUNS", "POSSESSIVES", "CONJUNCTIONS", "WH_WORDS"]  # fmt: skip


# French adjective (masc sg[:fem sg[:masc pl[:fem pl[:masc sg before a vowel]]]]) | English | pre or post
ADJECTIVES = """
rouge|red|post
bleu|blue|post
vert|green|post
jaune|yellow|post
noir|black|post
blanc:blanche|white|post
gris:grise:gris|grey|post
brun|brown|post
rose|pink|post
violet:violette|purple|post
rapide|fast|post
lent|slow|post
chaud|hot|post
froid|cold|post
propre|clean|post
sale|dirty|post
lourd|heavy|post
léger:légère|light|post
cher:chère|expensive|post
facile|easy|post
difficile|difficult|post
célèbre|famous|post
riche|rich|post
pauvre|poor|post
triste|sad|post
heureux:heureuse:heureux|happy|post
fatigué|tired|post
malade|ill|post
content|glad|post
fort|strong|post
faible|weak|post
intelligent|clever|post
gentil:gentille|kind|post
méchant|nasty|post
drôle|funny|post
timide|shy|post
calme|calm|post
bruyant|noisy|post
sérieux:sérieuse:sérieux|serious|post
curieux:curieuse:curieux|curious|post
courageux:courageuse:courageux|brave|post
paresseux:paresseuse:paresseux|lazy|post
poli|polite|post
étrange|strange|post
moderne|modern|post
ancien:ancienne|ancient|post
rond|round|post
carré|square|post
plein|full|post
vide|empty|post
sec:sèche|dry|post
mouillé|wet|post
doux:douce:doux|soft|post
dur|hard|post
ouvert|open|post
fermé|closed|post
cassé|broken|post
court|short|post
étroit|narrow|post
large|wide|post
grand|big|pre
petit|small|pre
beau:belle:beaux:belles:bel|beautiful|pre
joli|pretty|pre
vieux:vieille:vieux:vieilles:vieil|old|pre
jeune|young|pre
nouveau:nouvelle:nouveaux:nouvelles:nouvel|new|pre
bon:bonne|good|pre
mauvais:mauvaise:mauvais|bad|pre
gros:grosse:gros|fat|pre
long:longue|long|pre
"""

# French infinitive | English base[:past] | class ('er', 'ir', 're' or an irregular
# table 'present forms x6/past participle/future stem') | t (transitive) or i (intransitive)
VERBS = """
manger|eat:ate|er|t
regarder|watch:watched|er|t
aimer|like:liked|er|t
chercher|look for:looked for|er|t
trouver|find:found|er|t
porter|carry:carried|er|t
laver|wash:washed|er|t
préparer|prepare:prepared|er|t
dessiner|draw:drew|er|t
garder|keep:kept|er|t
quitter|leave:left|er|t
visiter|visit:visited|er|t
écouter|listen to:listened to|er|t
utiliser|use:used|er|t
montrer|show:showed|er|t
cacher|hide:hid|er|t
tirer|pull:pulled|er|t
pousser|push:pushed|er|t
oublier|forget:forgot|er|t
réparer|repair:repaired|er|t
fermer|close:closed|er|t
casser|break:broke|er|t
commander|order:ordered|er|t
emprunter|borrow:borrowed|er|t
apporter|bring:brought|er|t
toucher|touch:touched|er|t
goûter|taste:tasted|er|t
couper|cut:cut|er|t
attraper|catch:caught|er|t
lancer|throw:threw|er|t
compter|count:counted|er|t
chasser|chase:chased|er|t
sauver|save:saved|er|t
décorer|decorate:decorated|er|t
vérifier|check:checked|er|t
copier|copy:copied|er|t
imprimer|print:printed|er|t
signer|sign:signed|er|t
louer|rent:rented|er|t
admirer|admire:admired|er|t
respecter|respect:respected|er|t
aider|help:helped|er|t
inviter|invite:invited|er|t
rencontrer|meet:met|er|t
saluer|greet:greeted|er|t
remercier|thank:thanked|er|t
demander|ask for:asked for|er|t
refuser|refuse:refused|er|t
accepter|accept:accepted|er|t
adorer|love:loved|er|t
détester|hate:hated|er|t
gagner|win:won|er|t
ramasser|pick up:picked up|er|t
allumer|light:lit|er|t
éteindre|put out:put out|éteins éteins éteint éteignons éteignez éteignent/éteint/éteindr|t
perdre|lose:lost|re|t
vendre|sell:sold|re|t
attendre|wait for:waited for|re|t
entendre|hear:heard|re|t
rendre|return:returned|re|t
finir|finish:finished|ir|t
choisir|choose:chose|ir|t
remplir|fill:filled|ir|t
nourrir|feed:fed|ir|t
prendre|take:took|prends prends prend prenons prenez prennent/pris/prendr|t
comprendre|understand:understood|comprends comprends comprend comprenons comprenez comprennent/compris/comprendr|t
apprendre|learn:learned|apprends apprends apprend apprenons apprenez apprennent/appris/apprendr|t
voir|see:saw|vois vois voit voyons voyez voient/vu/verr|t
faire|make:made|fais fais fait faisons faites font/fait/fer|t
lire|read:read|lis lis lit lisons lisez lisent/lu/lir|t
écrire|write:wrote|écris écris écrit écrivons écrivez écrivent/écrit/écrir|t
boire|drink:drank|bois bois boit buvons buvez boivent/bu/boir|t
ouvrir|open:opened|ouvre ouvres ouvre ouvrons ouvrez ouvrent/ouvert/ouvrir|t
conduire|drive:drove|conduis conduis conduit conduisons conduisez conduisent/conduit/conduir|t
construire|build:built|construis construis construit construisons construisez construisent/construit/construir|t
dormir|sleep:slept|dors dors dort dormons dormez dorment/dormi/dormir|i
courir|run:ran|cours cours court courons courez courent/couru/courr|i
rire|laugh:laughed|ris ris rit rions riez rient/ri/rir|i
sourire|smile:smiled|souris souris sourit sourions souriez sourient/souri/sourir|i
mentir|lie:lied|mens mens ment mentons mentez mentent/menti/mentir|i
travailler|work:worked|er|i
chanter|sing:sang|er|i
danser|dance:danced|er|i
nager|swim:swam|er|i
marcher|walk:walked|er|i
pleurer|cry:cried|er|i
crier|shout:shouted|er|i
jouer|play:played|er|i
voyager|travel:travelled|er|i
étudier|study:studied|er|i
cuisiner|cook:cooked|er|i
tousser|cough:coughed|er|i
sauter|jump:jumped|er|i
rêver|dream:dreamed|er|i
patiner|skate:skated|er|i
parler|speak:spoke|er|i
attendre|wait:waited|re|i
réfléchir|think:thought|ir|i
grandir|grow:grew|ir|i
rougir|blush:blushed|ir|i
"""

# preposition | English | French head word (index into the French words)
PREPOSITIONS = """
dans|in|0
sur|on|0
sous|under|0
devant|in front of|0
derrière|behind|0
avec|with|0
sans|without|0
pour|for|0
vers|towards|0
après|after|0
avant|before|0
contre|against|0
pendant|during|0
près de|near|0
loin de|far from|0
à côté de|next to|1
à|at|0
"""

NUMBERS = """
deux|two
trois|three
quatre|four
cinq|five
six|six
sept|seven
huit|eight
neuf|nine
dix|ten
onze|eleven
douze|twelve
treize|thirteen
quatorze|fourteen
quinze|fifteen
seize|sixteen
dix-sept|seventeen
dix-huit|eighteen
dix-neuf|nineteen
vingt|twenty
"""

NAMES = """
Marie|f
Paul|m
Sophie|f
Pierre|m
Julie|f
Thomas|m
Claire|f
Louis|m
Emma|f
Hugo|m
Léa|f
Lucas|m
Chloé|f
Nicolas|m
Camille|f
Antoine|m
Alice|f
Julien|m
Manon|f
Marc|m
"""

# time adverbials by tense: French | English
TIMES = {
    "present": ["aujourd'hui|today", "maintenant|now", "ce soir|tonight"],
    "past": ["hier|yesterday", "hier soir|last night", "la semaine dernière|last week"],
    "future": ["demain|tomorrow", "bientôt|soon", "la semaine prochaine|next week"],
}

# subject pronouns: French, English, person (1-3), plural, gender (None: either)
PRONOUNS = [
    ("je", "I", 1, False, None),
    ("tu", "you", 2, False, None),
    ("il", "he", 3, False, "m"),
    ("elle", "she", 3, False, "f"),
    ("nous", "we", 1, True, None),
    ("vous", "you", 2, True, None),
    ("ils", "they", 3, True, "m"),
    ("elles", "they", 3, True, "f"),
]

# object pronouns (placed before the verb in French): French, English, person, plural
OBJECT_PRONOUNS = [
    ("me", "me", 1, False),
    ("te", "you", 2, False),
    ("nous", "us", 1, True),
    ("vous", "you", 2, True),
    ("les", "them", 3, True),
]

# possessive determiners: (masc sg, fem sg, plural), English, person, plural possessor
POSSESSIVES = [
    (("mon", "ma", "mes"), "my"),
    (("ton", "ta", "tes"), "your"),
    (("notre", "notre", "nos"), "our"),
    (("votre", "votre", "vos"), "your"),
    (("leur", "leur", "leurs"), "their"),
]

CONJUNCTIONS = ["et|and", "mais|but", "parce que|because"]
WH_WORDS = ["pourquoi|why", "quand|when", "où|where"]
