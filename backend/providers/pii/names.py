"""Word lists of the name heuristic (TRN-10): common English and Dutch first names, Dutch surname particles
(tussenvoegsels), titles, and the words that may never be taken for a surname.

The first-name lists hold the most frequent given names of England/Wales, the United States and the
Netherlands (recent decades and older generations), written from public frequency tables in our own selection.
They are deliberately not exhaustive: a name not listed is simply not guessed (precision before recall).
"""

from __future__ import annotations


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


ENGLISH_FIRST_NAMES = _words("""
Aaron Abigail Adam Adrian Aiden Alan Albert Alex Alexander Alexandra Alfie Alice Alicia Alison Amanda Amelia Amy
Andrea Andrew Angela Anita Ann Anne Annie Anthony Archie Arthur Ashley Austin Ava Barbara Barry Beatrice Benjamin
Bernard Beth Bethany Betty Beverley Billy Bradley Brandon Brenda Brian Bruce Caleb Cameron Carl Carol Caroline
Carolyn Catherine Charles Charlie Charlotte Chloe Christian Christina Christine Christopher Claire Clara Colin
Connor Craig Cynthia Daniel Danielle Darren David Deborah Debra Denise Dennis Derek Diana Diane Donald Donna
Dorothy Douglas Dylan Edward Eleanor Elijah Elizabeth Ella Ellie Emily Emma Eric Ethan Evelyn Florence Frances
Freddie Freya Gail Gareth Gary George Georgia Gerald Gillian Gloria Graham Gregory Hannah Harold Harriet Harry
Harvey Heidi Helen Henry Isaac Isabel Isabella Isabelle Isla Jacob Jacqueline James Jamie Janet Janice Jasmine
Jason Jeffrey Jennifer Jeremy Jessica Joan Joanna Joanne John Jonathan Joseph Joshua Joyce Judith Julia Julie
Justin Karen Katherine Kathleen Kathryn Katie Keith Kelly Kenneth Kevin Kimberly Laura Lauren Leah Leo Leon
Leonard Lewis Liam Linda Lisa Logan Louis Louise Lucy Luke Lydia Madison Margaret Maria Marie Marilyn Martha
Martin Mary Matilda Matthew Megan Melanie Melissa Michael Michelle Mildred Millie Mohammed Muhammad Nancy Natalie
Nathan Nicholas Nicola Noah Norman Oliver Olivia Oscar Owen Pamela Patricia Patrick Paul Paula Peter Philip
Phoebe Phyllis Poppy Rachel Raymond Rebecca Richard Robert Robin Roger Ronald Rosie Ruth Ryan Samantha Samuel
Sandra Sarah Scott Sean Sharon Shirley Simon Sophia Sophie Stanley Stephanie Stephen Steven Stuart Susan Teresa
Theo Theodore Thomas Timothy Toby Tracey Tyler Victoria Vincent Virginia Walter Wayne William Zachary Zoe
Abdul Ahmed Ali Amir Ana Carlos Daniela Diego Fatima Gabriel Gabriela Hassan Ibrahim Jose Juan Leila Luis Maya
Mia Mohamed Omar Priya Rahul Sara Sofia Yusuf Ella Aisha Kate Katy Kirsty Lindsay Stacey Wendy Yvonne Shaun
Dominic Duncan Elliot Elliott Felix Finley Frederick Gavin Hugo Ian Jake Joel Jordan Kieran Lee Marcus Mason Neil
Nigel Rhys Ross Russell Seth Spencer Terence Trevor Tristan Troy Vernon Victor Zach Abby Alexis Anya Bella Bonnie
Brooke Caitlin Cara Carla Cassandra Chelsea Courtney Daisy Eliza Elsie Erin Esme Eva Evie Faye Fiona Gemma Grace
Harper Heather Holly Imogen Ivy Jade Jane Jenna Jenny Jodie Kayla Keira Kerry Layla Lilly Lily Lola Lorna Lucia
Mabel Maisie Mandy Maryam Maureen Mollie Molly Naomi Nina Nora Paige Penelope Pippa Rita Rose Ruby Sadie Scarlett
Shannon Sienna Stella Summer Tanya Tessa Tina Vanessa Violet Willow Yasmin
""")

DUTCH_FIRST_NAMES = _words("""
Aad Aafke Aagje Adriaan Adrianus Agnes Albert Alexander Anke Anna Annelies Anneke Annemarie Anouk Arend Arie Arjan
Arjen Arnold Astrid Bart Bas Bastiaan Ben Bernard Bert Bianca Bram Bregje Carla Casper Cees Charlotte Chantal
Christiaan Claudia Coen Cor Cornelia Cornelis Daan Danique Dennis Dick Dirk Dirkje Dewi Dorien Douwe Edwin
Eline Elise Ellen Els Emma Erik Esmee Esther Eva Evert Evi Fabian Femke Finn Fleur Floor Floris Frank Frans
Freek Frits Gerard Gerben Gerda Gerrit Gert Gijs Guus Hans Harm Hendrik Hendrika Henk Herman Hugo Ilse Inge
Ingrid Iris Isa Jaap Jacob Jacoba Jacobus Jan Janneke Jannes Jasper Jelle Jeroen Jesse Joep Johan Johanna
Johannes Jolanda Joost Joris Jos Josephine Julia Juliette Jurgen Karin Kees Klaas Koen Laura Lars Lauren
Leendert Lieke Lieve Linda Lisa Liza Loes Lotte Lucas Luuk Maaike Maarten Manon Marco Marieke Marijke Marit
Marjolein Mark Marloes Martijn Martin Mees Merel Micha Michiel Milan Milou Mirjam Monique Naomi Nicole Niels
Nienke Noah Noor Olivier Patrick Paul Pieter Pim Puck Quinten Remco Renate Rick Rik Rob Robin Roel Roos Rosa
Ruben Rutger Ruud Sander Sanne Saskia Sebastiaan Sem Siem Sietske Simone Sjoerd Sofie Sophie Stefan Stijn Suzanne
Sven Teun Thijs Thomas Tijn Tim Tom Tobias Twan Vera Willem Willemijn Wim Wouter Yara Yvonne Zoë Annet
Annika Babette Berend Bob Boris Brecht Demi Diederik Dominique Eefje Eelco Egbert Eveline Fenna Fien Frederik
Gijsbert Hanneke Heleen Hidde Huub Ids Ivo Jade Jelmer Jelte Jet Jildou Job Jochem Jolien Jorien Josje Jules Jurre
Justus Kim Lana Lenny Lennart Liam Lieke Lisanne Luc Maud Max Maxime Meike Menno Mieke Mila Mirte Nina Nout
Olaf Otto Pepijn Petra Pien Pieternella Quirine Reinier Rens Rianne Rinus Rogier Romy Roy Sabine Sara Sarah Sil
Silke Sjaak Sofia Stan Sterre Sven Tamara Tess Tessa Thom Tineke Tjeerd Tjitske Valerie Vincent Wendy Wies
Wilhelmina Wilma Wilco Yfke Youri Yvette Zeger Ahmed Fatima Mohamed Mohammed Yousra Youssef Ayoub Bilal Hamza
Ibrahim Imane Karim Nadia Omar Rayan Salma Sara Soufiane Yasmina Zakaria Adam Amira Aya Ilyas Mehmet Elif Emre
""")

# Names that are also everyday words ("Will you", "Mark the date", "Hope so", "Roos" = rose): at the start of a
# sentence they prove nothing, so they only start a name there with more evidence (a particle or a title).
AMBIGUOUS_FIRST_NAMES = _words("""
Will May June April August Mark Bill Grace Hope Rose Faith Joy Art Sue Guy Pat Ray Dean Chase Hunter Rich Frank
Jack Max Bob Dawn Drew Gene Holly Ivy Iris Lily Daisy Jade Ruby Summer Violet Willow Penny Sandy Miles Cliff Dale
Glen Lane Rob Wade Warren Victor Bas Roos Fleur Mees Merel Noor Floor Ben Wil Kim Tim Puck Stan Lee Harper Jordan
Austin Georgia Virginia Florence Chelsea Madison Finn
""")

FIRST_NAMES = ENGLISH_FIRST_NAMES | DUTCH_FIRST_NAMES

# Surname particles as they are written after a first name or initials (lowercase), longest first when matched.
PARTICLES: tuple[tuple[str, ...], ...] = tuple(sorted((tuple(p.split()) for p in (
    "van der", "van den", "van de", "van het", "van 't", "in 't", "van", "de", "den", "der", "ter", "ten", "te",
    "het", "'t", "de la", "du", "le", "la", "von", "von der", "zu", "di", "da", "del", "dos", "das",
)), key=len, reverse=True))

# Titles that announce a surname ("Mr Smith", "mevrouw De Vries"); the title itself stays in the text.
TITLES = _words("""
Mr Mrs Ms Miss Mx Dr Prof Sir Dame Lady Lord Dhr Mevr Mw Meneer Mevrouw Mijnheer Juffrouw meneer mevrouw mijnheer
juffrouw dhr mevr mw
""")

# Words that are never a surname, whatever precedes them: function words, greetings, months, days, and nouns
# that follow a first name in place and organisation names ("Victoria Station", "Jordan Valley").
NOT_SURNAMES = _words("""
the a an and or but nor if of to in on at by for with from as is are was were be been being has have had do does
did will would can could should may might must shall not no yes this that these those it its he she they we you
i me him her them us my your his our their who whom what when where why how which there here then than so too
very also just all any some every each both either neither about after before again said says told asked ask
thanks thank please hi hello hey dear regards best cheers kind today tomorrow yesterday tonight now later soon
someone anyone everyone nobody something anything everything nothing one two three only even still yet ever never
always often sometimes called calls call wrote writes asks replied answered agreed thinks thought knows knew
wants wanted needs needed says likes liked lives lived works worked went goes came comes got gets has sent
de het een en maar aan met voor naar bij uit over onder tegen zijn waren heeft hebben wordt worden kan kunnen moet
wil zal zou niet geen ja nee dit dat deze die hij zij ze wij jij je u ik mij hem haar hun ons onze mijn jouw uw
wie wat wanneer waar waarom hoe welke er hier daar dan toen ook nog al alle elke iedereen niemand iets niets
dank bedankt groeten groet hallo hoi beste vandaag morgen gisteren vanavond straks zegt zei vroeg belde belt
schreef schrijft woont werkt ging gaat kwam komt heeft had wilde
january february march april may june july august september october november december
januari februari maart mei juni juli augustus oktober
monday tuesday wednesday thursday friday saturday sunday
maandag dinsdag woensdag donderdag vrijdag zaterdag zondag
christmas easter kerst kerstmis pasen pinksteren koningsdag
street road avenue lane drive way square place station line airport university college school academy hospital
clinic park bank beach valley bridge hotel centre center tower house hall church cathedral museum library street
inc ltd llc plc bv nv group company corp corporation foundation institute trust tech labs team club fund partners
associates holdings services solutions systems international airlines council committee ministry department
city county state river lake island mountain hill bay harbour harbor port gate road estate mall market
straat laan weg plein gracht kade singel dijk markt haven stichting gemeente universiteit ziekenhuis school kerk
amsterdam rotterdam utrecht eindhoven groningen tilburg almere breda nijmegen haarlem arnhem leiden delft maastricht
zwolle enschede apeldoorn amersfoort nederland holland belgium belgië london manchester birmingham liverpool leeds
bristol glasgow edinburgh cardiff belfast dublin paris berlin madrid rome brussels brussel antwerpen antwerp york
boston chicago washington california texas florida england britain scotland wales ireland france germany spain
italy europe america canada australia india china japan africa asia english dutch french german british american
google microsoft apple amazon facebook meta openai twitter linkedin github slack teams zoom excel word outlook
""")
