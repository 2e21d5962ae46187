"""The labelled development set for memory search (MEM-13): people, records in English and Dutch, and queries of
four kinds with their gold records.

- lexical: a few of the record's own words, in the record's language;
- paraphrase: a question in plain words in the record's language that shares (almost) no word with it;
- cross-lingual: such a question in the other language;
- shared: a question about one of the organisation's shared records (either language).

Every person has records of 14 of the 24 topics below (a different value each), a few notes that answer no
query, and sees the organisation's shared records. A query is asked as its person: the gold is her record of
that topic (or the shared record). Any record of another person in a result is a leak. The set is generated
deterministically from the tables here; nothing is random.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Lang = Literal["en", "nl"]
Kind = Literal["lexical", "paraphrase", "cross-lingual", "shared"]
KINDS: tuple[Kind, ...] = ("lexical", "paraphrase", "cross-lingual", "shared")


@dataclass(frozen=True)
class Topic:
    name: str
    en: str  # record text with {v}
    nl: str
    values: tuple[tuple[str, str], ...]  # (English, Dutch) values, 12 of them
    lexical_en: str  # a short query of the record's own words
    lexical_nl: str
    ask_en: tuple[str, str]  # plain-word questions that avoid the record's words
    ask_nl: tuple[str, str]


TOPICS: tuple[Topic, ...] = (
    Topic("allergy", "Is allergic to {v}.", "Is allergisch voor {v}.",
          (("peanuts", "pinda's"), ("shellfish", "schaaldieren"), ("gluten", "gluten"), ("lactose", "lactose"),
           ("eggs", "eieren"), ("sesame", "sesam"), ("penicillin", "penicilline"), ("cat hair", "kattenhaar"),
           ("bee stings", "bijensteken"), ("kiwi fruit", "kiwi's"), ("soy", "soja"), ("mustard", "mosterd")),
          "allergic {v}", "allergisch {v}",
          ("which foods could make her ill?", "what should she avoid because her body reacts badly to it?"),
          ("van welk eten wordt ze ziek?", "waar moet ze van wegblijven omdat haar lichaam erop reageert?")),
    Topic("birthday", "Her birthday is on {v}.", "Haar verjaardag is op {v}.",
          (("12 March", "12 maart"), ("3 June", "3 juni"), ("28 October", "28 oktober"), ("1 January", "1 januari"),
           ("17 August", "17 augustus"), ("9 December", "9 december"), ("22 April", "22 april"), ("5 July", "5 juli"),
           ("30 September", "30 september"), ("14 February", "14 februari"), ("6 May", "6 mei"),
           ("19 November", "19 november")),
          "birthday {v}", "verjaardag {v}",
          ("when was she born?", "on what date should we send her a card to celebrate?"),
          ("wanneer is ze jarig?", "op welke datum is ze geboren?")),
    Topic("pet", "Has a {v}.", "Heeft een {v}.",
          (("dog named Max", "hond die Max heet"), ("cat named Luna", "kat die Luna heet"),
           ("rabbit named Snuffie", "konijn dat Snuffie heet"), ("parrot named Kiki", "papegaai die Kiki heet"),
           ("goldfish named Bubbles", "goudvis die Bubbles heet"), ("horse named Storm", "paard dat Storm heet"),
           ("tortoise named Sam", "schildpad die Sam heet"), ("hamster named Pip", "hamster die Pip heet"),
           ("labrador named Bo", "labrador die Bo heet"), ("guinea pig named Toffee", "cavia die Toffee heet"),
           ("budgie named Blue", "parkiet die Blue heet"), ("ferret named Zorro", "fret die Zorro heet")),
          "{v}", "{v}",
          ("does she keep any animals at home?", "which pet lives with her?"),
          ("heeft ze huisdieren?", "welk dier woont er bij haar thuis?")),
    Topic("diet", "{v}.", "{v}.",
          (("Eats no meat; she is vegetarian", "Eet geen vlees; ze is vegetariër"),
           ("Is vegan and avoids all animal products", "Is veganist en mijdt alle dierlijke producten"),
           ("Eats no pork", "Eet geen varkensvlees"),
           ("Follows a low-salt diet", "Volgt een zoutarm dieet"),
           ("Eats halal meat only", "Eet alleen halal vlees"),
           ("Avoids sugar and sweets", "Mijdt suiker en snoep"),
           ("Eats fish but no other meat", "Eet vis maar verder geen vlees"),
           ("Eats kosher", "Eet koosjer"),
           ("Follows a keto diet with few carbohydrates", "Volgt een ketodieet met weinig koolhydraten"),
           ("Drinks no alcohol", "Drinkt geen alcohol"),
           ("Eats no spicy food", "Eet geen pittig eten"),
           ("Fasts until noon every day", "Vast elke dag tot het middaguur")),
          "{v}", "{v}",
          ("what does she eat and not eat?", "are there dietary wishes to keep in mind for dinner?"),
          ("waar moeten we rekening mee houden bij het avondeten?", "wat eet ze wel en wat niet?")),
    Topic("job", "Works as a {v}.", "Werkt als {v}.",
          (("nurse in a hospital", "verpleegkundige in een ziekenhuis"), ("software engineer", "software-ontwikkelaar"),
           ("primary school teacher", "leraar op een basisschool"), ("accountant", "boekhouder"),
           ("architect", "architect"), ("pharmacist", "apotheker"), ("electrician", "elektricien"),
           ("journalist at a newspaper", "journalist bij een krant"), ("lawyer", "advocaat"), ("baker", "bakker"),
           ("airline pilot", "piloot"), ("dentist", "tandarts")),
          "works {v}", "werkt {v}",
          ("what does she do for a living?", "what is her profession?"),
          ("wat is haar beroep?", "waar verdient ze haar geld mee?")),
    Topic("city", "Lives in {v}.", "Woont in {v}.",
          (("Utrecht", "Utrecht"), ("Rotterdam", "Rotterdam"), ("Ghent", "Gent"), ("Amsterdam", "Amsterdam"),
           ("Leiden", "Leiden"), ("Antwerp", "Antwerpen"), ("Eindhoven", "Eindhoven"), ("Groningen", "Groningen"),
           ("The Hague", "Den Haag"), ("Brussels", "Brussel"), ("Haarlem", "Haarlem"), ("Delft", "Delft")),
          "lives {v}", "woont {v}",
          ("where is her home?", "which town is she based in?"),
          ("in welke stad is ze thuis?", "wat is haar woonplaats?")),
    Topic("sport", "Plays {v} every week.", "Speelt elke week {v}.",
          (("tennis", "tennis"), ("football", "voetbal"), ("hockey", "hockey"), ("volleyball", "volleybal"),
           ("badminton", "badminton"), ("squash", "squash"), ("basketball", "basketbal"), ("golf", "golf"),
           ("table tennis", "tafeltennis"), ("padel", "padel"), ("korfball", "korfbal"), ("water polo", "waterpolo")),
          "plays {v}", "speelt {v}",
          ("what does she do to keep fit?", "which sport is she into?"),
          ("hoe blijft ze fit?", "welke sport beoefent ze?")),
    Topic("drink", "Takes her {v}.", "Drinkt graag {v}.",
          (("coffee black without sugar", "zwarte koffie zonder suiker"), ("tea with milk", "thee met melk"),
           ("latte with oat milk", "latte met havermelk"), ("green tea", "groene thee"),
           ("espresso double", "dubbele espresso"), ("cappuccino", "cappuccino"),
           ("mint tea", "verse muntthee"), ("coffee with milk and two sugars", "koffie met melk en twee suikers"),
           ("hot chocolate", "warme chocolademelk"), ("rooibos tea", "rooibosthee"),
           ("decaf coffee", "cafeïnevrije koffie"), ("chai latte", "chai latte")),
          "{v}", "{v}",
          ("how does she like her hot drink?", "what should I bring her from the café?"),
          ("wat wil ze bij de koffiepauze?", "wat kan ik voor haar meenemen van het café?")),
    Topic("children", "Has {v}.", "Heeft {v}.",
          (("two children, a son and a daughter", "twee kinderen, een zoon en een dochter"),
           ("one daughter of six", "een dochter van zes"), ("three sons", "drie zonen"),
           ("a baby boy born in May", "een zoontje dat in mei geboren is"), ("twin girls", "een tweeling van twee meisjes"),
           ("a teenage son", "een zoon in de puberteit"), ("two grown-up daughters", "twee volwassen dochters"),
           ("a stepson", "een stiefzoon"), ("four children", "vier kinderen"), ("an adopted daughter", "een geadopteerde dochter"),
           ("a son at university", "een zoon die studeert"), ("a toddler", "een peuter")),
          "{v}", "{v}",
          ("is she a parent?", "how big is her family?"),
          ("is ze moeder?", "hoe groot is haar gezin?")),
    Topic("language", "Speaks {v} fluently.", "Spreekt vloeiend {v}.",
          (("Spanish", "Spaans"), ("German", "Duits"), ("French", "Frans"), ("Turkish", "Turks"), ("Arabic", "Arabisch"),
           ("Polish", "Pools"), ("Italian", "Italiaans"), ("Portuguese", "Portugees"), ("Japanese", "Japans"),
           ("Russian", "Russisch"), ("Mandarin", "Mandarijn"), ("Greek", "Grieks")),
          "speaks {v}", "spreekt {v}",
          ("which foreign languages does she know?", "can she talk with people from abroad in their own tongue?"),
          ("welke talen beheerst ze?", "kan ze met buitenlanders in hun eigen taal praten?")),
    Topic("commute", "{v}.", "{v}.",
          (("Cycles to the office", "Fietst naar kantoor"), ("Takes the train to work", "Neemt de trein naar het werk"),
           ("Drives to work by car", "Gaat met de auto naar het werk"), ("Takes the bus to work", "Neemt de bus naar het werk"),
           ("Walks to the office", "Loopt naar kantoor"), ("Rides a scooter to work", "Gaat op de scooter naar het werk"),
           ("Takes the tram to work", "Neemt de tram naar het werk"), ("Carpools with a colleague", "Rijdt mee met een collega"),
           ("Takes the ferry to work", "Neemt de pont naar het werk"), ("Rides an e-bike to work", "Gaat op een e-bike naar het werk"),
           ("Takes the metro to work", "Neemt de metro naar het werk"), ("Works from home every day", "Werkt elke dag thuis")),
          "{v}", "{v}",
          ("how does she get to her job?", "how does she travel in the morning?"),
          ("hoe komt ze op haar werk?", "hoe reist ze 's ochtends?")),
    Topic("music", "Loves {v}.", "Houdt van {v}.",
          (("jazz", "jazz"), ("classical music", "klassieke muziek"), ("hip-hop", "hiphop"), ("opera", "opera"),
           ("country music", "countrymuziek"), ("heavy metal", "heavy metal"), ("reggae", "reggae"), ("techno", "techno"),
           ("folk songs", "volksmuziek"), ("the Beatles", "de Beatles"), ("soul and funk", "soul en funk"),
           ("film soundtracks", "filmmuziek")),
          "loves {v}", "houdt van {v}",
          ("what does she like to listen to?", "which songs or bands does she enjoy?"),
          ("waar luistert ze graag naar?", "welke artiesten vindt ze leuk?")),
    Topic("health", "Has {v}.", "Heeft {v}.",
          (("type 1 diabetes", "diabetes type 1"), ("asthma", "astma"), ("migraine attacks", "migraineaanvallen"),
           ("high blood pressure", "hoge bloeddruk"), ("chronic back pain", "chronische rugpijn"),
           ("epilepsy", "epilepsie"), ("a heart condition", "een hartaandoening"), ("rheumatism", "reuma"),
           ("hearing loss in one ear", "gehoorverlies aan één oor"), ("coeliac disease", "coeliakie"),
           ("an underactive thyroid", "een trage schildklier"), ("sleep apnoea", "slaapapneu")),
          "{v}", "{v}",
          ("does she have any medical conditions?", "what health problems does she live with?"),
          ("heeft ze een medische aandoening?", "met welke gezondheidsklachten leeft ze?")),
    Topic("contact", "Prefers to be contacted by {v}.", "Wil het liefst benaderd worden via {v}.",
          (("email", "e-mail"), ("phone", "de telefoon"), ("WhatsApp", "WhatsApp"), ("text message", "sms"),
           ("letter", "een brief"), ("Signal", "Signal"), ("video call", "videobellen"), ("LinkedIn", "LinkedIn"),
           ("voicemail", "voicemail"), ("Slack", "Slack"), ("Teams", "Teams"), ("post", "de post")),
          "contacted by {v}", "benaderd via {v}",
          ("how should we reach her?", "what is the best way to get in touch with her?"),
          ("hoe kunnen we haar het beste bereiken?", "via welk kanaal neem ik contact met haar op?")),
    Topic("meetings", "Prefers meetings {v}.", "Heeft liever afspraken {v}.",
          (("in the morning", "in de ochtend"), ("after lunch", "na de lunch"), ("on Mondays", "op maandag"),
           ("late in the afternoon", "laat in de middag"), ("before ten o'clock", "voor tien uur"),
           ("on Fridays", "op vrijdag"), ("online", "online"), ("in person", "op locatie"), ("of half an hour at most", "van hooguit een half uur"),
           ("on Tuesday mornings", "op dinsdagochtend"), ("outside school hours", "buiten schooltijden"),
           ("early in the week", "vroeg in de week")),
          "meetings {v}", "afspraken {v}",
          ("when is a good time to schedule a call with her?", "when would she rather get together to talk?"),
          ("wanneer kan ik het beste een gesprek met haar plannen?", "wanneer komt het haar uit om samen te zitten?")),
    Topic("holiday", "Is going on holiday to {v} in August.", "Gaat in augustus op vakantie naar {v}.",
          (("Italy", "Italië"), ("Portugal", "Portugal"), ("Norway", "Noorwegen"), ("Greece", "Griekenland"),
           ("Canada", "Canada"), ("Japan", "Japan"), ("Spain", "Spanje"), ("Iceland", "IJsland"), ("Croatia", "Kroatië"),
           ("Thailand", "Thailand"), ("Scotland", "Schotland"), ("Morocco", "Marokko")),
          "holiday {v}", "vakantie {v}",
          ("where is she travelling this summer?", "what are her trip plans for the summer?"),
          ("waar reist ze deze zomer heen?", "wat zijn haar reisplannen voor de zomer?")),
    Topic("hobby", "Enjoys {v} in her spare time.", "Houdt zich in haar vrije tijd bezig met {v}.",
          (("painting", "schilderen"), ("gardening", "tuinieren"), ("knitting", "breien"), ("photography", "fotografie"),
           ("baking bread", "brood bakken"), ("woodworking", "houtbewerking"), ("birdwatching", "vogels kijken"),
           ("pottery", "pottenbakken"), ("hiking in the mountains", "wandelen in de bergen"),
           ("reading crime novels", "detectives lezen"), ("playing the piano", "pianospelen"), ("sailing", "zeilen")),
          "{v}", "{v}",
          ("what are her hobbies?", "what does she like to do at the weekend?"),
          ("wat zijn haar hobby's?", "wat doet ze graag in het weekend?")),
    Topic("fear", "Is afraid of {v}.", "Is bang voor {v}.",
          (("spiders", "spinnen"), ("heights", "hoogtes"), ("flying", "vliegen"), ("dogs", "honden"),
           ("the dentist", "de tandarts"), ("thunderstorms", "onweer"), ("deep water", "diep water"),
           ("crowds", "mensenmassa's"), ("needles", "naalden"), ("the dark", "het donker"),
           ("small spaces", "kleine ruimtes"), ("snakes", "slangen")),
          "afraid {v}", "bang {v}",
          ("what scares her?", "does she have any phobias?"),
          ("wat vindt ze eng?", "heeft ze een fobie?")),
    Topic("partner", "Is married to {v}.", "Is getrouwd met {v}.",
          (("Tom", "Tom"), ("Pieter", "Pieter"), ("Sanne", "Sanne"), ("Mark", "Mark"), ("Youssef", "Youssef"),
           ("Lisa", "Lisa"), ("Ruben", "Ruben"), ("Jasper", "Jasper"), ("Emma", "Emma"), ("Thijs", "Thijs"),
           ("Koen", "Koen"), ("Olivia", "Olivia")),
          "married {v}", "getrouwd {v}",
          ("who is her spouse?", "does she have a husband or wife?"),
          ("wie is haar echtgenoot?", "met wie deelt ze haar leven?")),
    Topic("dish", "Her favourite dish is {v}.", "Haar lievelingsgerecht is {v}.",
          (("lasagne", "lasagne"), ("sushi", "sushi"), ("pancakes", "pannenkoeken"), ("Thai green curry", "Thaise groene curry"),
           ("mussels with fries", "mosselen met friet"), ("stamppot with sausage", "stamppot met worst"),
           ("paella", "paella"), ("ramen", "ramen"), ("couscous", "couscous"), ("pizza margherita", "pizza margherita"),
           ("mushroom risotto", "paddenstoelenrisotto"), ("falafel", "falafel")),
          "favourite dish {v}", "lievelingsgerecht {v}",
          ("what does she love to eat?", "what should we cook for her birthday dinner?"),
          ("wat eet ze het allerliefst?", "wat moeten we voor haar koken als ze komt eten?")),
    Topic("study", "Studied {v} at university.", "Heeft {v} gestudeerd aan de universiteit.",
          (("law", "rechten"), ("medicine", "geneeskunde"), ("history", "geschiedenis"), ("physics", "natuurkunde"),
           ("economics", "economie"), ("psychology", "psychologie"), ("chemistry", "scheikunde"),
           ("philosophy", "filosofie"), ("mathematics", "wiskunde"), ("biology", "biologie"),
           ("architecture", "bouwkunde"), ("art history", "kunstgeschiedenis")),
          "studied {v}", "gestudeerd {v}",
          ("what is her educational background?", "what degree does she hold?"),
          ("welke opleiding heeft ze gevolgd?", "waarin is ze afgestudeerd?")),
    Topic("volunteer", "Volunteers at {v} on Saturdays.", "Doet op zaterdag vrijwilligerswerk bij {v}.",
          (("the food bank", "de voedselbank"), ("an animal shelter", "een dierenasiel"), ("the library", "de bibliotheek"),
           ("a care home", "een verpleeghuis"), ("the local football club", "de voetbalclub"),
           ("a refugee centre", "een asielzoekerscentrum"), ("the hospice", "het hospice"),
           ("a community garden", "een buurttuin"), ("the museum", "het museum"), ("a homework club", "een huiswerkklas"),
           ("the zoo", "de dierentuin"), ("a repair café", "een repaircafé")),
          "volunteers {v}", "vrijwilligerswerk {v}",
          ("does she do any unpaid work for a good cause?", "where does she help out for free?"),
          ("zet ze zich ergens onbetaald in?", "waar helpt ze gratis mee?")),
    Topic("saving", "Is saving money for {v}.", "Spaart voor {v}.",
          (("a house", "een huis"), ("a new car", "een nieuwe auto"), ("a trip around the world", "een wereldreis"),
           ("her wedding", "haar bruiloft"), ("early retirement", "vervroegd pensioen"), ("a sailing boat", "een zeilboot"),
           ("her children's education", "de studie van haar kinderen"), ("a new kitchen", "een nieuwe keuken"),
           ("a camper van", "een camper"), ("solar panels", "zonnepanelen"), ("a sabbatical", "een sabbatical"),
           ("a piano", "een piano")),
          "saving {v}", "spaart {v}",
          ("what is she putting money aside for?", "what big purchase is she planning?"),
          ("waarvoor legt ze geld opzij?", "welke grote aankoop plant ze?")),
    Topic("learning", "Is learning to {v}.", "Leert {v}.",
          (("play the guitar", "gitaar spelen"), ("drive", "autorijden"), ("swim", "zwemmen"), ("cook Thai food", "Thais koken"),
           ("program in Python", "programmeren in Python"), ("speak Dutch", "Nederlands spreken"), ("dance salsa", "salsa dansen"),
           ("sew her own clothes", "haar eigen kleren naaien"), ("ski", "skiën"), ("paint with watercolours", "aquarelleren"),
           ("play chess", "schaken"), ("sing in a choir", "zingen in een koor")),
          "learning {v}", "leert {v}",
          ("what new skill is she picking up?", "what is she taking lessons in?"),
          ("welke nieuwe vaardigheid oefent ze?", "waar neemt ze les in?")),
)

# Notes that answer no query: distractors among a person's own records.
NOTES: tuple[tuple[str, str], ...] = (
    ("Called on Tuesday about the invoice.", "Belde dinsdag over de factuur."),
    ("Asked for a copy of the contract.", "Vroeg om een kopie van het contract."),
    ("Missed the team meeting last week.", "Was vorige week niet bij het teamoverleg."),
    ("Wants the quarterly report by Friday.", "Wil het kwartaalrapport voor vrijdag."),
    ("Changed her bank account number.", "Heeft haar rekeningnummer gewijzigd."),
    ("Complained that the website was slow.", "Klaagde dat de website traag was."),
    ("Renewed her subscription for another year.", "Heeft haar abonnement met een jaar verlengd."),
    ("Needs a new parking permit.", "Heeft een nieuwe parkeervergunning nodig."),
    ("Mentioned a leaking roof at home.", "Noemde een lekkend dak thuis."),
    ("Ordered a standing desk.", "Heeft een sta-bureau besteld."),
)

# The organisation's shared records, each with one plain-word question (language of the question given).
SHARED: tuple[tuple[str, Lang, str, Lang], ...] = (
    ("The office is closed on public holidays.", "en", "is the building open on Easter Monday?", "en"),
    ("Expense claims must be submitted within 30 days.", "en", "hoe lang heb ik om bonnetjes in te leveren?", "nl"),
    ("Customer support is available on weekdays from 9:00 to 17:00.", "en", "when can customers call the helpdesk?", "en"),
    ("De parkeergarage is alleen toegankelijk met een toegangspas.", "nl", "how do I get into the car park?", "en"),
    ("Refunds are processed within 14 days.", "en", "hoe snel krijgt een klant zijn geld terug?", "nl"),
    ("Het wifi-wachtwoord hangt op het prikbord in de kantine.", "nl", "where can I find the wireless network password?", "en"),
    ("Passwords must be changed every 90 days.", "en", "how often do I need new login credentials?", "en"),
    ("Op vrijdag verzorgt de zaak de lunch.", "nl", "is food provided at the office?", "en"),
    ("Fire drills take place twice a year.", "en", "hoe vaak oefenen we de ontruiming?", "nl"),
    ("Nieuwe medewerkers krijgen een laptop op hun eerste werkdag.", "nl", "when do new hires receive a computer?", "en"),
    ("Pets are not allowed in the building.", "en", "mag ik mijn hond meenemen naar kantoor?", "nl"),
    ("Het kantoor in Utrecht ligt tegenover het centraal station.", "nl", "where is the Utrecht branch located?", "en"),
    ("Holiday requests need manager approval two weeks in advance.", "en", "hoe vraag ik verlof aan?", "nl"),
    ("De printer op de tweede verdieping is kapot.", "nl", "which printer is out of order?", "en"),
    ("Visitors must sign in at reception.", "en", "wat moeten gasten doen als ze binnenkomen?", "nl"),
    ("Thuiswerken mag op maandag en vrijdag.", "nl", "which days can staff work remotely?", "en"),
    ("The annual company outing is in September.", "en", "wanneer is het jaarlijkse personeelsuitje?", "nl"),
    ("Salarissen worden op de 25e van de maand uitbetaald.", "nl", "when is payday?", "en"),
    ("Smoking is only permitted outside the main entrance.", "en", "waar mag ik een sigaret opsteken?", "nl"),
    ("Wie ziek is meldt zich voor negen uur af bij de leidinggevende.", "nl", "what should I do when I am ill?", "en"),
    ("The gym in the basement is free for employees.", "en", "is er een sportschool voor het personeel?", "nl"),
    ("Vergaderruimtes reserveer je via de agenda.", "nl", "how do I book a meeting room?", "en"),
    ("The canteen serves vegetarian options every day.", "en", "kan ik in de kantine zonder vlees eten?", "nl"),
    ("Business flights need approval from finance.", "en", "do I need permission to fly for work?", "en"),
)

# Held-out questions (never used for tuning): per topic one new plain-word question in each language, and one new
# question per shared record. `heldout()` asks them as paraphrase (record's language) and cross-lingual (the other).
HELD_TOPICS: dict[str, tuple[str, str]] = {
    "allergy": ("is there anything she must never be given to eat?", "mag ze bepaalde dingen absoluut niet binnenkrijgen?"),
    "birthday": ("which day does she turn a year older?", "op welke dag wordt ze een jaar ouder?"),
    "pet": ("who does she feed and walk besides herself?", "zorgt ze thuis voor een beest?"),
    "diet": ("is there something she refuses to put on her plate?", "wat laat ze altijd op haar bord liggen?"),
    "job": ("where does she earn her salary?", "welk vak oefent ze uit?"),
    "city": ("in which place does she reside?", "waar staat haar huis?"),
    "sport": ("what game does she practise with a team or a racket?", "aan welke lichaamsbeweging doet ze?"),
    "drink": ("what is her usual order at the coffee machine?", "wat schenk ik haar in als ze op bezoek komt?"),
    "children": ("does she have kids?", "heeft ze nakomelingen?"),
    "language": ("in which tongues can she hold a conversation?", "welke vreemde taal spreekt ze goed?"),
    "commute": ("what transport does she use on workdays?", "met welk vervoermiddel gaat ze naar haar baan?"),
    "music": ("what kind of sound does she put on at home?", "welk genre zet ze op als ze ontspant?"),
    "health": ("is she dealing with an illness?", "is ze ergens ziek van?"),
    "contact": ("which channel should I use to message her?", "hoe stuur ik haar het beste een bericht?"),
    "meetings": ("at what moment is she happy to have an appointment?", "welk tijdstip past haar voor een overleg?"),
    "holiday": ("which country is she visiting during the summer break?", "naar welk land gaat ze deze zomer?"),
    "hobby": ("what pastime keeps her busy after work?", "wat doet ze als ze vrij is?"),
    "fear": ("what makes her nervous or panicky?", "waar raakt ze van in paniek?"),
    "partner": ("who is her other half?", "wie is haar partner?"),
    "dish": ("which meal makes her happiest?", "welke maaltijd vindt ze het lekkerst?"),
    "study": ("which subject did she major in?", "welke studie heeft ze gedaan?"),
    "volunteer": ("where does she give her time without pay?", "bij welke organisatie helpt ze vrijwillig?"),
    "saving": ("what goal is she building up her savings for?", "waar zet ze elke maand geld voor apart?"),
    "learning": ("which course is she following at the moment?", "wat probeert ze zich op dit moment eigen te maken?"),
}
HELD_SHARED: tuple[tuple[str, Lang], ...] = (
    ("are we working on national holidays?", "en"), ("when is the deadline for declaring costs?", "en"),
    ("op welke uren is de klantenservice bereikbaar?", "nl"), ("what do I need to enter the parking garage?", "en"),
    ("how long until a customer is reimbursed?", "en"), ("hoe log ik in op het draadloze netwerk?", "nl"),
    ("hoe vaak moet ik mijn wachtwoord vernieuwen?", "nl"), ("do we get a free meal at work on some days?", "en"),
    ("how many evacuation exercises are there each year?", "en"), ("what equipment do new colleagues get?", "en"),
    ("may I bring my cat to work?", "en"), ("waar vind ik de vestiging in Utrecht?", "nl"),
    ("who must agree before I take days off?", "en"), ("welke printer werkt niet?", "nl"),
    ("what should a guest do on arrival?", "en"), ("wanneer mag ik vanuit huis werken?", "nl"),
    ("when is the yearly staff trip?", "en"), ("wanneer krijg ik mijn loon?", "nl"),
    ("where may people smoke?", "en"), ("hoe meld ik me ziek?", "nl"),
    ("can staff work out in the building?", "en"), ("how do I reserve a room for a meeting?", "en"),
    ("is there meat-free food in the staff restaurant?", "en"), ("who approves air travel for business?", "en"),
)

PEOPLE: tuple[tuple[str, Lang], ...] = (
    ("anna", "en"), ("carla", "nl"), ("eva", "en"), ("femke", "nl"), ("hanna", "en"), ("ilse", "nl"),
    ("karin", "en"), ("lotte", "nl"), ("mila", "en"), ("noor", "nl"), ("sara", "en"), ("tess", "nl"),
)
TOPICS_PER_PERSON = 14
NOTES_PER_PERSON = 5


@dataclass(frozen=True)
class Record:
    ref: str  # stable name within the set
    subject: str | None  # None: shared
    lang: Lang
    text: str


@dataclass(frozen=True)
class Query:
    ref: str
    kind: Kind
    subject: str  # asked as this person
    lang: Lang
    text: str
    gold: tuple[str, ...]  # record refs


@dataclass
class DevSet:
    records: list[Record] = field(default_factory=list)
    queries: list[Query] = field(default_factory=list)


def _other(lang: Lang) -> Lang:
    return "nl" if lang == "en" else "en"


def build() -> DevSet:
    out = DevSet()
    for s, (text, lang, question, q_lang) in enumerate(SHARED):
        out.records.append(Record(f"shared{s:02d}", None, lang, text))
        asker = PEOPLE[s % len(PEOPLE)][0]
        out.queries.append(Query(f"q-shared{s:02d}", "shared", asker, q_lang, question, (f"shared{s:02d}",)))
    for p, (person, primary) in enumerate(PEOPLE):
        for j in range(TOPICS_PER_PERSON):
            t = (p * 5 + j) % len(TOPICS)
            topic = TOPICS[t]
            en_value, nl_value = topic.values[(p + 2 * t) % len(topic.values)]
            lang: Lang = primary if (p + j) % 4 else _other(primary)
            value = en_value if lang == "en" else nl_value
            text = (topic.en if lang == "en" else topic.nl).format(v=value)
            ref = f"{person}-{topic.name}"
            out.records.append(Record(ref, person, lang, text))
            same = topic.ask_en if lang == "en" else topic.ask_nl
            other = topic.ask_nl if lang == "en" else topic.ask_en
            variant = (p + t) % 2
            out.queries.append(Query(f"q-{ref}-para", "paraphrase", person, lang, same[variant], (ref,)))
            out.queries.append(Query(f"q-{ref}-cross", "cross-lingual", person, _other(lang), other[1 - variant],
                                     (ref,)))
            if (p + j) % 2 == 0:
                lexical = (topic.lexical_en if lang == "en" else topic.lexical_nl).format(v=value)
                out.queries.append(Query(f"q-{ref}-lex", "lexical", person, lang, lexical, (ref,)))
        for n in range(NOTES_PER_PERSON):
            en, nl = NOTES[(p * 3 + n) % len(NOTES)]
            lang = primary if n % 3 else _other(primary)
            out.records.append(Record(f"{person}-note{n}", person, lang, en if lang == "en" else nl))
    return out


def subset(devset: DevSet, every: int) -> DevSet:
    """Every `every`-th query of each kind (the records stay whole), for the quick check in `make test`."""
    picked: list[Query] = []
    for kind in KINDS:
        picked += [q for q in devset.queries if q.kind == kind][::every]
    return DevSet(devset.records, picked)


def heldout() -> DevSet:
    """The same records with the held-out questions (HELD_TOPICS, HELD_SHARED): paraphrase, cross-lingual and
    shared queries in wordings the search was never tuned on. `make eval-search` reports it beside the set."""
    dev = build()
    out = DevSet(dev.records, [])
    for s, (question, lang) in enumerate(HELD_SHARED):
        asker = PEOPLE[(s + 5) % len(PEOPLE)][0]
        out.queries.append(Query(f"h-shared{s:02d}", "shared", asker, lang, question, (f"shared{s:02d}",)))
    for record in dev.records:
        if record.subject is None or "-note" in record.ref:
            continue
        en, nl = HELD_TOPICS[record.ref.split("-", 1)[1]]
        same, other = (en, nl) if record.lang == "en" else (nl, en)
        out.queries.append(Query(f"h-{record.ref}-para", "paraphrase", record.subject, record.lang, same,
                                 (record.ref,)))
        out.queries.append(Query(f"h-{record.ref}-cross", "cross-lingual", record.subject, _other(record.lang),
                                 other, (record.ref,)))
    return out
