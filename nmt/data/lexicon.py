"""French and English lexicon of the built-in corpus (see ``toy.py``).

Each table is one entry a line, fields separated by ``|``. Irregular forms are
spelt out; regular ones are derived by the rules in ``toy.py``.
"""

# French noun | gender | English | a (animate: may be a subject)
# French plural and English plural follow a ':' where irregular.
NOUNS = """
chat|m|cat|a
chien|m|dog|a
cheval:chevaux|m|horse|a
oiseau:oiseaux|m|bird|a
lapin|m|rabbit|a
souris:souris|f|mouse:mice|a
vache|f|cow|a
cochon|m|pig|a
mouton|m|sheep:sheep|a
poule|f|hen|a
canard|m|duck|a
renard|m|fox|a
loup|m|wolf:wolves|a
ours:ours|m|bear|a
lion|m|lion|a
tigre|m|tiger|a
singe|m|monkey|a
éléphant|m|elephant|a
serpent|m|snake|a
poisson|m|fish:fish|a
tortue|f|turtle|a
grenouille|f|frog|a
abeille|f|bee|a
araignée|f|spider|a
garçon|m|boy|a
fille|f|girl|a
homme|m|man:men|a
femme|f|woman:women|a
enfant|m|child:children|a
bébé|m|baby|a
frère|m|brother|a
sœur|f|sister|a
père|m|father|a
mère|f|mother|a
oncle|m|uncle|a
tante|f|aunt|a
cousin|m|cousin|a
voisin|m|neighbour|a
voisine|f|neighbour|a
professeur|m|teacher|a
élève|m|pupil|a
médecin|m|doctor|a
infirmière|f|nurse|a
policier|m|police officer|a
boulanger|m|baker|a
cuisinier|m|cook|a
facteur|m|postman:postmen|a
fermier|m|farmer|a
roi|m|king|a
reine|f|queen|a
prince|m|prince|a
princesse|f|princess|a
soldat|m|soldier|a
pilote|m|pilot|a
chanteur|m|singer|a
danseuse|f|dancer|a
étudiant|m|student|a
voleur|m|thief:thieves|a
client|m|customer|a
juge|m|judge|a
avocat|m|lawyer|a
touriste|m|tourist|a
tasse|f|cup
table|f|table
chaise|f|chair
livre|m|book
stylo|m|pen
crayon|m|pencil
cahier|m|notebook
lettre|f|letter
journal:journaux|m|newspaper
carte|f|map
lampe|f|lamp
porte|f|door
fenêtre|f|window
mur|m|wall
lit|m|bed
maison|f|house
voiture|f|car
vélo|m|bike
bateau:bateaux|m|boat
avion|m|plane
train|m|train
bus:bus|m|bus:buses
camion|m|truck
route|f|road
rue|f|street
pont|m|bridge
ville|f|city
village|m|village
jardin|m|garden
parc|m|park
forêt|f|forest
rivière|f|river
lac|m|lake
montagne|f|mountain
plage|f|beach
mer|f|sea
île|f|island
champ|m|field
arbre|m|tree
fleur|f|flower
feuille|f|leaf:leaves
pierre|f|stone
pomme|f|apple
orange|f|orange
banane|f|banana
poire|f|pear
gâteau:gâteaux|m|cake
tarte|f|pie
sandwich|m|sandwich
œuf|m|egg
fromage|m|cheese
soupe|f|soup
assiette|f|plate
bol|m|bowl
verre|m|glass
bouteille|f|bottle
couteau:couteaux|m|knife:knives
fourchette|f|fork
cuillère|f|spoon
clé|f|key
sac|m|bag
boîte|f|box
panier|m|basket
chapeau:chapeaux|m|hat
chemise|f|shirt
robe|f|dress
manteau:manteaux|m|coat
chaussure|f|shoe
veste|f|jacket
écharpe|f|scarf:scarves
gant|m|glove
montre|f|watch
bague|f|ring
collier|m|necklace
horloge|f|clock
téléphone|m|phone
ordinateur|m|computer
télévision|f|television
radio|f|radio
photo|f|photo
tableau:tableaux|m|painting
miroir|m|mirror
fauteuil|m|armchair
canapé|m|sofa
tapis:tapis|m|carpet
rideau:rideaux|m|curtain
armoire|f|wardrobe
bureau:bureaux|m|desk
école|f|school
église|f|church
hôpital:hôpitaux|m|hospital
hôtel|m|hotel
gare|f|station
magasin|m|shop
marché|m|market
restaurant|m|restaurant
musée|m|museum
bibliothèque|f|library
cuisine|f|kitchen
chambre|f|bedroom
salon|m|living room
jouet|m|toy
balle|f|ball
ballon|m|balloon
poupée|f|doll
guitare|f|guitar
piano|m|piano
violon|m|violin
tambour|m|drum
cadeau:cadeaux|m|present
parapluie|m|umbrella
bougie|f|candle
couverture|f|blanket
oreiller|m|pillow
valise|f|suitcase
billet|m|ticket
enveloppe|f|envelope
timbre|m|stamp
histoire|f|story
chanson|f|song
film|m|film
jeu:jeux|m|game
question|f|question
réponse|f|answer
idée|f|idea
image|f|picture
étoile|f|star
nuage|m|cloud
lune|f|moon
colline|f|hill
château:châteaux|m|castle
tour|f|tower
grotte|f|cave
bouton|m|button
échelle|f|ladder
marteau:marteaux|m|hammer
corde|f|rope
seau:seaux|m|bucket
roue|f|wheel
moteur|m|engine
robot|m|robot
fusée|f|rocket
"""

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
